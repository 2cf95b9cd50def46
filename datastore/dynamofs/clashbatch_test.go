package dynamofs_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
)

// TestClashBatchedReads (issue 31): a commit of many new files reads each
// partition once for its clash checks instead of once per file, and still
// refuses a new file with a live file below it, in one transaction and in
// a commit of several (whole), whichever batch holds the clashing file.
func TestClashBatchedReads(t *testing.T) {
	d := newDriver(t)
	s := datastore.New(d)
	ctx := t.Context()
	commit := func(paths ...string) error {
		t.Helper()
		var es []datastore.Entry
		for _, p := range paths {
			st, err := s.Upload(ctx, p, strings.NewReader(p), nil)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, datastore.Entry{Put: &st})
		}
		_, err := s.Commit(ctx, nil, es)
		return err
	}
	many := func(dir string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s/f%03d", dir, i))
		}
		return out
	}
	// Files deep enough not to be a model's directory (modelDirOf), so
	// that the partition's own read is all the commit Queries.
	for round := range 2 {
		before := d.Stats()
		if err := commit(many(fmt.Sprintf("data/t/fresh/x/y%d", round), 10)...); err != nil {
			t.Fatal(err)
		}
		if q := d.Stats().Sub(before).Requests["Query"]; q != 1 {
			t.Fatalf("commit %d of 10 new files to one model sent %d Queries, want 1 (one read of the partition)", round, q)
		}
	}
	// Two or three new files to a partition of fewer than 100 positions:
	// one read of it too (a page), not a Query each (a model's first
	// rows in the catalog's namespace partition); one new file keeps its
	// one Query.
	for _, n := range []int{1, 2, 3} {
		before := d.Stats()
		if err := commit(many(fmt.Sprintf("data/t/fresh/x/z%d", n), n)...); err != nil {
			t.Fatal(err)
		}
		if q := d.Stats().Sub(before).Requests["Query"]; q != 1 {
			t.Fatalf("a commit of %d new files to a small partition sent %d Queries, want 1", n, q)
		}
	}
	if err := commit("data/t/m/d/below"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 5, 40} { // one transaction; a whole commit of several
		paths := append(many(fmt.Sprintf("data/t/m/n%d", n), n-1), "data/t/m/d")
		err := commit(paths...)
		if _, ok := datastore.AsClash(err); !ok {
			t.Fatalf("a commit of %d new files, one of them a directory of a live file: %v, want a clash", n, err)
		}
		if _, err := s.Stat(ctx, paths[0]); err == nil {
			t.Fatalf("a file of the refused commit of %d is visible", n)
		}
	}
}

// TestClashBatchedReadsMeetForeignItems: the one read of a partition also
// meets a file item a client that is not lake wrote with a raw PutItem (no
// head): a commit of many new files, one of them its directory, is refused
// (as TestForeignFileItemClashes for a single put).
func TestClashBatchedReadsMeetForeignItems(t *testing.T) {
	raw, table, s := rawStore(t)
	ctx := t.Context()
	foreign := "top/fx/d/deep" // its partition is the same under every layout
	if _, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "f#" + datastore.Partition(foreign)}, "sk": &types.AttributeValueMemberS{Value: foreign},
		"pos": &types.AttributeValueMemberN{Value: "1"}, "t": &types.AttributeValueMemberN{Value: "0"},
		"ver": &types.AttributeValueMemberS{Value: "00"}, "size": &types.AttributeValueMemberN{Value: "0"},
		"chunks": &types.AttributeValueMemberN{Value: "0"}, "sha": &types.AttributeValueMemberS{Value: "e3b0"},
	}}); err != nil {
		t.Fatal(err)
	}
	var es []datastore.Entry
	for _, p := range []string{"top/fx/a", "top/fx/b", "top/fx/c", "top/fx/d", "top/fx/e"} {
		st, err := s.Upload(ctx, p, strings.NewReader(p), nil)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, datastore.Entry{Put: &st})
	}
	_, err := s.Commit(ctx, nil, es)
	if cl, ok := datastore.AsClash(err); !ok || cl.Path != "top/fx/d" || cl.Other != foreign {
		t.Fatalf("a commit of 5 files, one the directory of a foreign file item: %v, want a clash naming both", err)
	}
}

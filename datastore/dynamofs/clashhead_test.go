package dynamofs_test

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// TestEmptyDeeperModelsNotQueried (issue 31): a commit of many new files
// data/t/hm/fNNN, each at the directory of a deeper model t/hm/fNNN that
// could exist, Queries none of those models when their heads (read with
// the commit) say they hold nothing; a model that does hold a file is
// still met and refused.
func TestEmptyDeeperModelsNotQueried(t *testing.T) {
	d := newDriver(t)
	s := datastore.New(d)
	ctx := t.Context()
	if _, err := s.Put(ctx, "data/t/hm/f003/n/v/raw", strings.NewReader("deep"), nil); err != nil {
		t.Fatal(err)
	}
	commit := func(paths []string) error {
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
	var paths []string
	for i := range 10 {
		paths = append(paths, fmt.Sprintf("data/t/hm/f%03d", i))
	}
	err := commit(paths)
	if cl, ok := datastore.AsClash(err); !ok || cl.Path != "data/t/hm/f003" || cl.Other != "data/t/hm/f003/n/v/raw" {
		t.Fatalf("a commit over the directory of a live deeper model's file: %v, want a clash naming both", err)
	}
	paths = slices.Delete(paths, 3, 4)
	before := d.Stats()
	if err := commit(paths); err != nil {
		t.Fatal(err)
	}
	if q := d.Stats().Sub(before).Requests["Query"]; q > 1 {
		t.Fatalf("a commit of 9 new files at the directories of empty models sent %d Queries, want at most 1 (its own partition's read)", q)
	}
	for _, p := range paths {
		if _, err := s.Stat(ctx, p); err != nil {
			t.Fatalf("stat %s: %v", p, err)
		}
	}
}

// TestDeeperModelWrittenBetweenReadAndCommit: a client that is not lake
// gives the empty model t/hr/f000 a file (its head with a seq, then the
// file item: what a commit of that model writes) after a commit of the
// file data/t/hr/f000 has read that model's head and before its
// transaction. The commit did not Query the model (its head said empty);
// its transaction's check of that head fails, it reads again, Queries and
// is refused naming both paths, and nothing of it is visible.
func TestDeeperModelWrittenBetweenReadAndCommit(t *testing.T) {
	for _, n := range []int{1, 12} { // one transaction; a staged (whole) commit with MaxCommit 4
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			raw := ddblocal.Client(t)
			table := ddblocal.TableName(t)
			ddblocal.CreateTable(t, raw, dynamofs.TableInput(table))
			d, err := dynamofs.Open(t.Context(), ddb.NewClient(ddblocal.Config(t), ""), dynamofs.Options{Table: table, MaxCommit: 4})
			if err != nil {
				t.Fatal(err)
			}
			s := datastore.New(d)
			t.Cleanup(func() { s.Close() })
			ctx := t.Context()
			// Register the partition t/hr first, so that the commit's
			// first write request is its transaction (its read done).
			if _, err := s.Put(ctx, "data/t/hr/zz", strings.NewReader("z"), nil); err != nil {
				t.Fatal(err)
			}
			const model, deep = "t/hr/f000", "data/t/hr/f000/n/v/raw"
			var fired atomic.Bool
			writes := 0
			d.SetWriteFault(func() error {
				writes++
				// The first write is the commit's transaction, or the
				// whole commit's first staging one (which creates its
				// record too): after its read either way.
				if writes != 1 || fired.Swap(true) {
					return nil
				}
				for _, it := range []map[string]types.AttributeValue{
					{"pk": sv("x#" + dynamofs.ShardOf(model)), "sk": sv(model), "seq": nv("1")},
					{"pk": sv("f#" + model), "sk": sv(deep), "pos": nv("1"), "t": nv("0"), "ver": sv("00"),
						"size": nv("0"), "chunks": nv("0"), "sha": sv("e3b0")},
				} {
					if _, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
						return err
					}
				}
				return nil
			})
			var es []datastore.Entry
			paths := []string{"data/t/hr/f000"}
			for i := 1; i < n; i++ {
				paths = append(paths, fmt.Sprintf("data/t/hr/g%03d", i))
			}
			for _, p := range paths {
				st, err := s.Upload(ctx, p, strings.NewReader(p), nil)
				if err != nil {
					t.Fatal(err)
				}
				es = append(es, datastore.Entry{Put: &st})
			}
			_, err = s.Commit(ctx, nil, es)
			d.SetWriteFault(nil)
			if !fired.Load() {
				t.Fatal("the foreign write never ran")
			}
			if cl, ok := datastore.AsClash(err); !ok || cl.Path != "data/t/hr/f000" || cl.Other != deep {
				t.Fatalf("a commit of %d files, its first over a model given a file after its read: %v, want a clash naming both", n, err)
			}
			for _, p := range paths {
				if _, err := s.Stat(ctx, p); err == nil {
					t.Fatalf("%s of the refused commit is visible", p)
				}
			}
		})
	}
}

func sv(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func nv(n string) types.AttributeValue { return &types.AttributeValueMemberN{Value: n} }

// TestHeadlessDeeperModelFoundByCheck: a client that is not lake writes a
// file item of the model t/fh/f000 with a raw PutItem and no head. A put
// of the model's directory trusts the model's head (none: no Query), so
// `lake data check` names the missing head, and once --repair rebuilt it
// the put is refused naming both paths.
func TestHeadlessDeeperModelFoundByCheck(t *testing.T) {
	raw, table, s := rawStore(t)
	ctx := t.Context()
	const model, deep = "t/fh/f000", "data/t/fh/f000/n/v/raw"
	if _, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"pk": sv("f#" + model), "sk": sv(deep), "pos": nv("1"), "t": nv("0"), "ver": sv("00"),
		"size": nv("0"), "chunks": nv("0"), "sha": sv("e3b0"),
	}}); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Check(ctx, datastore.CheckOptions{})
	if err != nil || !strings.Contains(fmt.Sprint(rep.Problems), model) {
		t.Fatalf("check beside a headless file item of %s: %v, %+v; want its head named", model, err, rep.Problems)
	}
	if _, err := s.Check(ctx, datastore.CheckOptions{Repair: true}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Put(ctx, "data/t/fh/f000", strings.NewReader("x"), nil)
	if cl, ok := datastore.AsClash(err); !ok || cl.Path != "data/t/fh/f000" || cl.Other != deep {
		t.Fatalf("a put of the directory of a repaired model's file: %v, want a clash naming both", err)
	}
}

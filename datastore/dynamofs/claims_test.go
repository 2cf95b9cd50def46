package dynamofs_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// TestClaimsCostNothingOnTheHotPath: a model's first commit claims its
// ancestor partitions (here "data") once; every put after the second of a new file
// of the model makes the requests it made before directory claims (one
// TransactGetItems, one Query below the new path, one TransactWriteItems
// besides the upload's own writes) and reads and writes the same items
// put after put (issue 27).
func TestClaimsCostNothingOnTheHotPath(t *testing.T) {
	d := newDriver(t)
	s := datastore.New(d)
	ctx := t.Context()
	// The first commit claims "data"; the second reads the claim and
	// caches it.
	for i := range 2 {
		if _, err := s.Put(ctx, fmt.Sprintf("data/t/i/n/w%d/raw", i), strings.NewReader("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	cost := func(i int) (reqs map[string]int64, read, written int64) {
		before := d.Stats()
		if _, err := s.Put(ctx, fmt.Sprintf("data/t/i/n/v%d/raw", i), strings.NewReader("x"), nil); err != nil {
			t.Fatal(err)
		}
		delta := d.Stats().Sub(before)
		return delta.Requests, delta.ItemsRead, delta.ItemsWritten
	}
	r1, read1, w1 := cost(1)
	for i := 2; i < 4; i++ {
		r, read, w := cost(i)
		if read != read1 || w != w1 || fmt.Sprint(r) != fmt.Sprint(r1) {
			t.Fatalf("put %d: %v, %d items read, %d written; put 1: %v, %d, %d", i, r, read, w, r1, read1, w1)
		}
	}
	if r1["GetItem"] != 0 || r1["TransactGetItems"] != 1 || r1["TransactWriteItems"] != 1 || r1["Query"] > 1 {
		t.Fatalf("a put of a new file of a claimed model: %v, want one TransactGetItems (the commit's snapshot), one TransactWriteItems, at most one Query, no GetItem", r1)
	}
	t.Logf("a put of a new data file: %v, %d items read, %d written", r1, read1, w1)
}

// TestClaimsNeverRefuseAlone: a model that claimed the partition "data"
// and was then emptied, or dropped, leaves no file below its directory,
// so a file may be put there: a claim only makes a put look (issue 27).
func TestClaimsNeverRefuseAlone(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	for _, m := range []string{"e/i", "g/i"} {
		if _, err := s.Put(ctx, "data/"+m+"/f", strings.NewReader("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Delete(ctx, "data/e/i/f"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DropPartition(ctx, nil, "g/i"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"data/e/i", "data/g/i"} {
		if _, err := s.Put(ctx, p, strings.NewReader("x"), nil); err != nil {
			t.Fatalf("put %s over an emptied or dropped model: %v", p, err)
		}
	}
	// And the other way round: with the file there, the model's files
	// are refused, naming both paths.
	_, err := s.Put(ctx, "data/e/i/g", strings.NewReader("x"), nil)
	if c, ok := datastore.AsClash(err); !ok || c.Path != "data/e/i/g" || c.Other != "data/e/i" {
		t.Fatalf("put data/e/i/g below the file data/e/i: %v", err)
	}
}

// TestClaimsThatDoNotFitGoFirst: models written before claims (their
// claims removed from the head by a raw UpdateItem, as a table of an older
// lake holds none), then one commit from a fresh process that replaces a
// file in each of 16 models of 16 types: with its claims the transaction
// would pass DynamoDB's 100 items, so the claims are made first, on their
// own, and the commit lands; afterwards the file data/tN/x (over model
// tN/x/y's files) is refused (issue 27).
func TestClaimsThatDoNotFitGoFirst(t *testing.T) {
	raw, table, s := rawStore(t)
	ctx := t.Context()
	var paths []string
	for i := range 16 {
		paths = append(paths, fmt.Sprintf("data/t%d/x/y/n/v/raw", i))
	}
	for _, p := range paths {
		// In chunks, as below: its replacement queues the version for
		// reclaim, one more item of the commit.
		if _, err := s.Put(ctx, p, strings.NewReader(oneChunk("1")), nil); err != nil {
			t.Fatal(err)
		}
	}
	out, err := raw.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	removed := 0
	for _, it := range out.Items {
		if _, ok := it["subs"]; !ok {
			continue
		}
		if _, err := raw.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]}, UpdateExpression: aws.String("REMOVE subs")}); err != nil {
			t.Fatal(err)
		}
		removed++
	}
	if removed < 17 {
		t.Fatalf("removed the claims of %d heads, want data's and the 16 types'", removed)
	}
	d2, s2 := anotherProcess(t, table)
	var entries []datastore.Entry
	for _, p := range paths {
		// Over InlineMax: a file in chunks adds its intent's delete to
		// the commit, which is what makes the claims not fit beside it.
		st, err := s2.Upload(ctx, p, strings.NewReader(oneChunk("2")), nil)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, datastore.Entry{Put: &st})
	}
	before := d2.Stats()
	if _, err := s2.Commit(ctx, nil, entries); err != nil {
		t.Fatalf("a commit of 16 models whose claims do not fit beside it: %v", err)
	}
	if n := d2.Stats().Sub(before).Requests["TransactWriteItems"]; n < 2 {
		t.Fatalf("the commit made %d TransactWriteItems, want its claims first, then itself", n)
	}
	_, err = s2.Put(ctx, "data/t3/x", strings.NewReader("x"), nil)
	if c, ok := datastore.AsClash(err); !ok || c.Path != "data/t3/x" || !strings.HasPrefix(c.Other, "data/t3/x/") {
		t.Fatalf("put data/t3/x over model t3/x/y: %v", err)
	}
}

// TestDropForgetsClaims: a dropped model's name leaves the subs of the
// heads it claimed, so that a loop of disposable models (seed 004) does
// not grow data's head toward DynamoDB's 400 KB item limit; and a process
// that cached the model's claim before the drop claims again at the
// model's next commit, so the file over it is still refused (issue 27).
func TestDropForgetsClaims(t *testing.T) {
	raw, table, s := rawStore(t)
	ctx := t.Context()
	subs := func() []string {
		t.Helper()
		out, err := raw.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, it := range out.Items {
			if ss, ok := it["subs"].(*types.AttributeValueMemberSS); ok {
				names = append(names, ss.Value...)
			}
		}
		slices.Sort(names)
		return names
	}
	put := func(s *datastore.Store, p string) error {
		_, err := s.Put(ctx, p, strings.NewReader("x"), nil)
		return err
	}
	if err := put(s, "data/m/keep/f"); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		m := fmt.Sprintf("m/d%02d", i)
		if err := put(s, "data/"+m+"/f"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DropPartition(ctx, nil, m); err != nil {
			t.Fatal(err)
		}
	}
	if got := subs(); strings.Join(got, ",") != "m/keep" {
		t.Fatalf("subs after 20 models made and dropped = %v; want m/keep only", got)
	}

	// Another process caches m/again's claim; the model is dropped; that
	// process's next commit of it claims again.
	_, s2 := anotherProcess(t, table)
	for _, p := range []string{"data/m/again/f", "data/m/again/g"} { // the second reads the claim and caches it
		if err := put(s2, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DropPartition(ctx, nil, "m/again"); err != nil {
		t.Fatal(err)
	}
	if got := subs(); slices.Contains(got, "m/again") {
		t.Fatalf("subs after m/again's drop = %v", got)
	}
	if err := put(s2, "data/m/again/h"); err != nil {
		t.Fatal(err)
	}
	if got := subs(); !slices.Contains(got, "m/again") {
		t.Fatalf("subs after m/again was made again by a process that had cached its claim = %v; want it claimed again", got)
	}
	err := put(s, "data/m/again")
	if c, ok := datastore.AsClash(err); !ok || c.Other != "data/m/again/h" {
		t.Fatalf("a file over the model made again: %v", err)
	}
}

// anotherProcess opens table's datastore as another process would: its own
// client and driver, nothing cached.
func anotherProcess(t *testing.T, table string) (*dynamofs.Driver, *datastore.Store) {
	t.Helper()
	d, err := dynamofs.Open(t.Context(), ddb.NewClient(ddblocal.Config(t), ""), dynamofs.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	return d, s
}

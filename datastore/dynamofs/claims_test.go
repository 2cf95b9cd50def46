package dynamofs_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
)

// TestClaimsCostNothingOnTheHotPath: a model's first commit claims its
// ancestor partitions (here "data") once; every put after the second of a new file
// of the model makes the requests it made before directory claims (one
// BatchGetItem, one Query below the new path, one TransactWriteItems
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
	if r1["GetItem"] != 0 || r1["BatchGetItem"] != 1 || r1["TransactWriteItems"] != 1 || r1["Query"] > 1 {
		t.Fatalf("a put of a new file of a claimed model: %v, want one BatchGetItem, one TransactWriteItems, at most one Query, no GetItem", r1)
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

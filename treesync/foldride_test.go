package treesync_test

import (
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/treesync"
)

// TestFoldRidesTheCommit (issue 31): on DynamoDB a sync whose fold needs
// no read (the dirty model's row read ahead, the cursor its last fold
// left, the index moved only by its own commit) carries the fold's rows
// and its cursor's record in the commit's own transaction: one
// TransactWriteItems, where the commit and the fold were two; the row is
// what a listing of the model says. The hostile case: another client
// rewrites the fold cursor's record between two syncs; the ride is refused
// on the record alone, the commit is sent again without it, the fold runs
// after it from the record, and the row is right; the next sync rides
// again. And another client's write of the row itself between the sync's
// read and its commit: refused on the row, the same way.
func TestFoldRidesTheCommit(t *testing.T) {
	s, sent := countingDynamoStore(t)
	ctx := t.Context()
	a := newTree(t, s, &treesync.Options{Namespace: "rd"})
	ns, err := s.Namespace("rd")
	if err != nil {
		t.Fatal(err)
	}
	write(t, a, "data/m/x/model.yaml", "type: m\n")
	write(t, a, "data/m/x/out/1/raw", "v1")
	sync(t, a, treesync.Scope{}) // the first row
	wantListedRow(t, ns, "m/x")

	// step syncs a change of one file and returns the transactions it
	// sent.
	step := func(content string) int {
		t.Helper()
		write(t, a, "data/m/x/out/1/raw", content)
		before := sent()["TransactWriteItems"]
		rep := sync(t, a, treesync.Scope{})
		if rep.Committed != 1 || rep.CatalogFolded < 1 {
			t.Fatalf("the sync committed %d and folded %d rows; want 1 and at least 1", rep.Committed, rep.CatalogFolded)
		}
		wantListedRow(t, ns, "m/x")
		return sent()["TransactWriteItems"] - before
	}
	for _, v := range []string{"v2", "v3"} {
		if n := step(v); n != 1 {
			t.Fatalf("a sync of one changed file sent %d TransactWriteItems; want 1 (the fold carried)", n)
		}
	}

	// Another client moves the record the tree's fold cursor guesses.
	recs := s.Records()
	key := "datastore/catalog/rd"
	old, err := recs.GetRecord(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := recs.CASRecord(ctx, key, metastore.ExpectValue(old), []byte("not a cursor")); err != nil {
		t.Fatal(err)
	}
	// The carried transaction refused, the commit alone, then the fold
	// as without a ride (its guess refused too, it folds again from the
	// record, which names no cursor: every partition).
	if n := step("v4"); n < 3 {
		t.Fatalf("a sync whose fold cursor's record another client moved sent %d TransactWriteItems; want the refused one, the commit alone and the fold's", n)
	}
	if n := step("v5"); n != 1 {
		t.Fatalf("the next sync sent %d TransactWriteItems; want 1 (the fold carried again)", n)
	}

	// Another client rewrites the row after the sync read it, right
	// before the commit: the transaction carrying the fold is refused on
	// the row (its condition is on the row as the sync read it), the
	// commit is sent alone, and the row ends what a listing of the model
	// says.
	cat, err := s.CatalogStore()
	if err != nil {
		t.Fatal(err)
	}
	treesync.SetCommitHook(func() {
		treesync.SetCommitHook(nil)
		if _, err := cat.Put(ctx, catalog.RowPath("rd", "m/x"), strings.NewReader(""), []byte(`{"ns":"rd","model":"m/x","state":"live"}`)); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(func() { treesync.SetCommitHook(nil) })
	if n := step("v6"); n < 2 {
		t.Fatalf("a sync whose row another client rewrote before its commit sent %d TransactWriteItems; want the refused one, the commit alone and the fold's", n)
	}
	if n := step("v7"); n != 1 {
		t.Fatalf("the next sync sent %d TransactWriteItems; want 1 (the fold carried again)", n)
	}
}

package treesync_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultapi"
	"github.com/lakemeta/lake/treesync"
)

// TestCursorPastOwnCommitLosesNothing (DynamoDB, issue 31): a sync moves
// its cursor past its own commit without reading it back; another
// process's commit that lands between the sync's pull and its commit, on
// the commit's shard or on another, is still pulled by the next sync.
func TestCursorPastOwnCommitLosesNothing(t *testing.T) {
	ctx := t.Context()
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
	var reads atomic.Int32
	var between atomic.Pointer[func()]
	faulty := faultapi.New(ddb.NewClient(ddblocal.Config(t), ""), func(op, _ string) faultapi.Fault {
		// The sync's first TransactGetItems is its commit's snapshot
		// read, after the read-ahead (a BatchGetItem) its pull took
		// the cursor from.
		if op == "TransactGetItems" && reads.Add(1) == 1 {
			if f := between.Swap(nil); f != nil {
				(*f)()
			}
		}
		return faultapi.None
	})
	open := func(api ddb.API) *datastore.Store {
		d, err := dynamofs.Open(ctx, api, dynamofs.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		s, err := datastore.Open(ctx, d, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s, other := open(faulty), open(ddb.NewClient(ddblocal.Config(t), ""))
	tr := newTree(t, s, &treesync.Options{Catalog: treesync.CatalogOff})
	mine := "m/0"
	var sameShard, elsewhere string
	for i := 1; sameShard == "" || elsewhere == ""; i++ {
		m := fmt.Sprintf("m/%d", i)
		if dynamofs.ShardOf(m) == dynamofs.ShardOf(mine) {
			if sameShard == "" {
				sameShard = m
			}
		} else if elsewhere == "" {
			elsewhere = m
		}
	}
	write(t, tr, "data/"+mine+"/a", "a")
	sync(t, tr, treesync.Scope{})
	for i, model := range []string{elsewhere, sameShard} {
		theirs := fmt.Sprintf("data/%s/theirs%d", model, i)
		f := func() {
			if _, err := other.Put(ctx, theirs, strings.NewReader("theirs"), nil); err != nil {
				t.Error(err)
			}
		}
		between.Store(&f)
		reads.Store(0)
		write(t, tr, fmt.Sprintf("data/%s/b%d", mine, i), "b")
		sync(t, tr, treesync.Scope{})
		if between.Load() != nil {
			t.Fatal("the other process's commit was not made during the sync")
		}
		sync(t, tr, treesync.Scope{})
		wantFile(t, tr, theirs, "theirs")
	}
}

package dynamofs_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/datastore/lifecycle"
	"github.com/lakemeta/lake/metastore"
)

// TestDropCarriesTheRowRemoval (issue 31, datastore.CommitRider): the
// lifecycle's drop of an orphaned model removes the model's catalog row in
// the drop's last transaction, not in a transaction of its own: one
// TransactWriteItems for the drop and the removal (two before: the
// negative control is the same drop with no rider offered). The row is
// gone, the catalog's feed has its deletion at the position Apply reports,
// and the model's partition is gone. The hostile peer: another client
// rewrites the row between the drop's read and its transaction (a foreign
// writer of the catalog, which the contract allows): the transaction fails
// on the row's condition only, the drop is sent again alone and stands,
// and the row's removal is then committed on its own, over the peer's row.
func TestDropCarriesTheRowRemoval(t *testing.T) {
	ctx := t.Context()
	_, open := tableOpener(t)
	d := open(0)
	ns, fence := fencedNamespace(t, datastore.New(d))
	orphan := func(model string) {
		t.Helper()
		var es []datastore.Entry
		for _, p := range []string{"data/" + model + "/model.yaml", "data/" + model + "/out/1/raw", "data/" + model + "/out/2/raw"} {
			st, err := ns.Upload(ctx, p, strings.NewReader("x"), nil)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, datastore.Entry{Put: &st})
		}
		if _, err := ns.Commit(ctx, fence, es); err != nil {
			t.Fatal(err)
		}
		if _, err := catalog.Fold(ctx, ns, fence); err != nil {
			t.Fatal(err)
		}
		if _, err := ns.Commit(ctx, fence, []datastore.Entry{{Delete: "data/" + model + "/model.yaml"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := catalog.Fold(ctx, ns, fence); err != nil {
			t.Fatal(err)
		}
		if r, ok, err := catalog.Get(ctx, ns, "ns", model); err != nil || !ok || r.State != catalog.Orphaned {
			t.Fatalf("%s's row before the drop: %+v, %v, %v; want it orphaned", model, r, ok, err)
		}
	}
	drop := func(model string) lifecycle.Stats {
		t.Helper()
		st, err := lifecycle.Apply(ctx, ns, fence, []lifecycle.Action{{Kind: lifecycle.DropModel, Namespace: "ns", Model: model}})
		if err != nil || st.Models != 1 {
			t.Fatalf("drop %s: %+v, %v", model, st, err)
		}
		return st
	}
	gone := func(model string, st lifecycle.Stats) {
		t.Helper()
		if _, ok, err := catalog.Get(ctx, ns, "ns", model); err != nil || ok {
			t.Fatalf("%s's row after the drop: %v, %v; want it removed", model, ok, err)
		}
		if got, err := ns.StatMany(ctx, []string{"data/" + model + "/out/1/raw"}); err != nil || len(got) != 0 {
			t.Fatalf("%s's file after the drop: %v, %v; want none", model, got, err)
		}
		if len(st.Removed) != 1 || len(st.Removed[0]) != 1 || !st.Removed[0][0].Deleted || st.Removed[0][0].Path != catalog.RowPath("ns", model) {
			t.Fatalf("%s's removal as Apply reports it: %+v; want the row's tombstone", model, st.Removed)
		}
		cat, err := ns.CatalogStore()
		if err != nil {
			t.Fatal(err)
		}
		rm := st.Removed[0][0]
		ch, _, err := cat.Changes(ctx, rm.Partition, rm.Pos-1, 10)
		if err != nil || len(ch) != 1 || ch[0].Path != rm.Path || !ch[0].Deleted || ch[0].Pos != rm.Pos {
			t.Fatalf("the catalog's feed at the removal: %+v, %v; want the row's deletion at %d", ch, err, rm.Pos)
		}
	}

	orphan("m/a")
	before := d.Stats()
	st := drop("m/a")
	c := d.Stats().Sub(before)
	if c.Requests["TransactWriteItems"] != 1 {
		t.Fatalf("the drop of a model with its row's removal sent %v; want one TransactWriteItems", c.Requests)
	}
	gone("m/a", st)

	// The negative control: the same drop with no rider offered (the
	// driver and the row as above) takes two transactions.
	orphan("m/b")
	if _, dropped, err := ns.DropPartitionIfDeleted(ctx, fence, "m/b", catalog.DefinitionPath("m/b")); err != nil || !dropped {
		t.Fatalf("drop m/b: %v, %v", dropped, err)
	}
	before = d.Stats()
	if _, err := catalog.Remove(ctx, ns, fence, "ns", "m/b"); err != nil {
		t.Fatal(err)
	}
	if c := d.Stats().Sub(before); c.Requests["TransactWriteItems"] != 1 {
		t.Fatalf("the row's removal on its own sent %v; want its own TransactWriteItems", c.Requests)
	}

	// The hostile peer rewrites the row right before the drop's
	// transaction.
	orphan("m/c")
	peer, err := datastore.New(open(0)).Namespace("ns")
	if err != nil {
		t.Fatal(err)
	}
	peerCat, err := peer.CatalogStore()
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	writes := 0 // write requests sent, refused ones too (the meter counts those that applied)
	d.SetWriteFault(func() error {
		writes++
		once.Do(func() {
			if _, err := peerCat.Put(ctx, catalog.RowPath("ns", "m/c"), strings.NewReader(`{"foreign":true}`), nil); err != nil {
				t.Errorf("the peer's row: %v", err)
			}
		})
		return nil
	})
	before = d.Stats()
	st = drop("m/c")
	d.SetWriteFault(nil)
	if c := d.Stats().Sub(before); writes != 3 || c.Requests["TransactWriteItems"] != 2 {
		t.Fatalf("the drop whose row a peer rewrote sent %d writes, %v applied; want 3 TransactWriteItems (the carrying one refused, the drop alone, the removal), 2 applied", writes, c.Requests)
	}
	gone("m/c", st)
}

// forwarding is a driver that forwards to another and says so
// (datastore.DriverUnwrapper), as a load harness's meter does; it has none
// of the driver's optional abilities.
type forwarding struct{ datastore.Driver }

func (f forwarding) Unwrap() datastore.Driver { return f.Driver }

func (f forwarding) Namespace(name string) (datastore.Driver, error) {
	d, err := f.Driver.Namespace(name)
	if err != nil {
		return nil, err
	}
	return forwarding{d}, nil
}

// TestDropCarriesTheRowRemovalBehindAWrapper: a store whose driver is
// wrapped (a load harness's meter) still has the removal carried: the
// carrying drop recognises the rider's driver behind the wrapper
// (datastore.UnwrapDriver). The wrapper hides the drop's own read of the
// guard and the prefetch, so the guard is read first and the removal reads
// for itself: still one transaction for the drop and the removal.
func TestDropCarriesTheRowRemovalBehindAWrapper(t *testing.T) {
	ctx := t.Context()
	_, open := tableOpener(t)
	d := open(0)
	ns, fence := fencedNamespace(t, datastore.New(forwarding{d}))
	st, err := ns.Upload(ctx, "data/m/w/out/1/raw", strings.NewReader("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Commit(ctx, fence, []datastore.Entry{{Put: &st}}); err != nil {
		t.Fatal(err)
	}
	if _, err := catalog.Fold(ctx, ns, fence); err != nil {
		t.Fatal(err)
	}
	before := d.Stats()
	got, err := lifecycle.Apply(ctx, ns, fence, []lifecycle.Action{{Kind: lifecycle.DropModel, Namespace: "ns", Model: "m/w"}})
	if err != nil || got.Models != 1 || len(got.Removed) != 1 {
		t.Fatalf("drop: %+v, %v", got, err)
	}
	if c := d.Stats().Sub(before); c.Requests["TransactWriteItems"] != 1 {
		t.Fatalf("the drop behind a wrapper sent %v; want one TransactWriteItems", c.Requests)
	}
	if _, ok, err := catalog.Get(ctx, ns, "ns", "m/w"); err != nil || ok {
		t.Fatalf("the row after the drop: %v, %v; want it removed", ok, err)
	}
}

// fencedNamespace returns root's namespace "ns" and a fence of its lock,
// whose record it writes.
func fencedNamespace(t *testing.T, root *datastore.Store) (*datastore.Store, *datastore.Fence) {
	t.Helper()
	ns, err := root.Namespace("ns")
	if err != nil {
		t.Fatal(err)
	}
	if err := root.Records().CASRecord(t.Context(), "rec/ns/sync", metastore.ExpectAbsent(), []byte("t")); err != nil {
		t.Fatal(err)
	}
	return ns, &datastore.Fence{Key: "rec/ns/sync", Token: []byte("t")}
}

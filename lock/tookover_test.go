package lock

import (
	"testing"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// TestTookOver (issue 28): a lease says whether its acquisition broke
// another holder, which a store whose writes cannot check the fence
// atomically (S3) needs to know to fence before it reads: the first
// acquisition (a missing record) and a takeover of an expired holder did;
// an acquisition after a release did not; one after a forced release did.
func TestTookOver(t *testing.T) {
	st := Metastore(newBolt(t))
	opts := &Options{Lease: 300 * time.Millisecond, Wait: 5 * time.Second, Holder: "a"}
	a, err := New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(st, &Options{Lease: 300 * time.Millisecond, Wait: 5 * time.Second, Holder: "b"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ls, err := a.Acquire(ctx, "ns/sync")
	if err != nil {
		t.Fatal(err)
	}
	if !ls.TookOver() {
		t.Error("the first acquisition (no record) did not report a takeover")
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ls, err = b.Acquire(ctx, "ns/sync")
	if err != nil {
		t.Fatal(err)
	}
	if ls.TookOver() {
		t.Error("an acquisition after a release reported a takeover")
	}
	ls.crash() // the holder stalls: its lease runs out
	ls2, err := a.Acquire(ctx, "ns/sync")
	if err != nil {
		t.Fatal(err)
	}
	if !ls2.TookOver() {
		t.Error("a takeover of an expired holder did not report it")
	}
	if err := b.ForceRelease(ctx, "ns/sync", ls2.Token()); err != nil {
		t.Fatal(err)
	}
	ls3, err := b.Acquire(ctx, "ns/sync")
	if err != nil {
		t.Fatal(err)
	}
	defer ls3.Release(ctx)
	if !ls3.TookOver() {
		t.Error("an acquisition after a forced release did not report a takeover")
	}
}

// TestDamagedRecordTakenOver: a lock record that is not one (damaged, or a
// foreign writer's bytes over a live holder's) proves no holder, as a
// missing one does: the next acquisition replaces it at once with a token
// of a new generation, above every token issued, reports a takeover (so a
// sync fences before it reads), and the holder whose record it replaced
// can no longer make a fenced write. Before, every acquisition failed on it
// ("is not a lock record"), with no way out but the backend's own tools.
func TestDamagedRecordTakenOver(t *testing.T) {
	st := Metastore(newBolt(t))
	opts := Options{Lease: 10 * time.Second, Wait: 5 * time.Second}
	a, b := newLocker(t, st, opts), newLocker(t, st, opts)
	ctx := t.Context()
	held, err := a.Acquire(ctx, "ns/sync")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	for _, garbage := range [][]byte{[]byte("garbage"), []byte(`{"token":0,"held":true}`), []byte(`{}`)} {
		cur, err := st.Get(ctx, "rec/ns/sync")
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Swap(ctx, "rec/ns/sync", cur, garbage); err != nil {
			t.Fatal(err)
		}
		ls, err := b.Acquire(ctx, "ns/sync")
		if err != nil {
			t.Fatalf("acquire over %q: %v, want it taken over", garbage, err)
		}
		if !ls.TookOver() {
			t.Errorf("the acquisition over %q did not report a takeover", garbage)
		}
		if ls.Token() <= held.Token() || ls.Token().Generation() <= held.Token().Generation() {
			t.Errorf("token over %q: %v, want a new generation above the old holder's %v", garbage, ls.Token(), held.Token())
		}
		if err := held.Write(ctx, metastore.Mutation{Key: "tbl/x", Value: []byte("stale")}); err == nil {
			t.Errorf("the holder whose record was replaced (%q) made a fenced write", garbage)
		}
		if err := ls.Release(ctx); err != nil {
			t.Fatal(err)
		}
		held = ls
	}
}

package lock

import (
	"testing"
	"time"
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

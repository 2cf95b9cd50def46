package lock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSeedNeverTakesALock (issue 31): a Locker seeded with the free record
// an earlier process released acquires with one write when the record is
// still that one; when another process has taken the lock since, the seed
// is stale and the acquisition waits for the holder as it would have
// without it (here it times out), never takes the lock from it; after the
// holder releases, the stale seed costs a failed write and a read, and the
// lock is acquired with a newer token. A record that is not a free lock
// record is not a seed.
func TestSeedNeverTakesALock(t *testing.T) {
	ctx := context.Background()
	st := Metastore(newBolt(t))
	o := Options{Lease: 2 * time.Second, Wait: 300 * time.Millisecond}
	first := newLocker(t, st, o)
	ls, err := first.Acquire(ctx, "ns/sync")
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	released := first.Known("ns/sync")
	if released == nil {
		t.Fatal("no record known after a release")
	}

	// Still true: one write.
	seeded := newLocker(t, st, o)
	seeded.Seed("ns/sync", released)
	ls, err = seeded.Acquire(ctx, "ns/sync")
	if err != nil || ls.Contended() != 0 {
		t.Fatalf("an acquisition seeded with the current record: %v", err)
	}
	tok := ls.Token()
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	released = seeded.Known("ns/sync")

	// Stale: another process holds the lock.
	holder := newLocker(t, st, o)
	held, err := holder.Acquire(ctx, "ns/sync")
	if err != nil {
		t.Fatal(err)
	}
	stale := newLocker(t, st, o)
	stale.Seed("ns/sync", released)
	if ls, err := stale.Acquire(ctx, "ns/sync"); !errors.Is(err, ErrTimeout) {
		if ls != nil {
			ls.Release(ctx)
		}
		t.Fatalf("an acquisition seeded with a stale record while another holds the lock: %v; want to wait it out (ErrTimeout)", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	stale = newLocker(t, st, o)
	stale.Seed("ns/sync", released)
	ls, err = stale.Acquire(ctx, "ns/sync")
	if err != nil || ls.Token() <= held.Token() || held.Token() <= tok {
		t.Fatalf("an acquisition seeded with a stale record, the lock free: %v, token %v after %v", err, ls.Token(), held.Token())
	}
	ls.Release(ctx)

	junk := newLocker(t, st, o)
	for _, rec := range [][]byte{[]byte("junk"), held.fence.Value} {
		junk.Seed("ns/sync", rec)
		if junk.Known("ns/sync") != nil {
			t.Fatalf("the seed %q was taken", rec)
		}
	}
}

package treesync_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dslock"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/treesync"
)

func TestSyncRoundTrip(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		a, b := newTree(t, s, nil), newTree(t, s, nil)
		write(t, a, "data/m/1/out/1/raw", "one")
		write(t, a, "data/m/1/out/2/raw", "two")
		write(t, a, "definitions/m.yaml", "def")
		if rep := sync(t, a, treesync.Scope{}); rep.Committed != 3 || rep.Uploaded != 3 {
			t.Fatalf("first sync: %+v, want 3 committed", rep)
		}
		// Nothing changed: nothing committed, nothing downloaded.
		if rep := sync(t, a, treesync.Scope{}); rep.Committed != 0 || rep.Downloaded != 0 || rep.Dirty != 0 {
			t.Fatalf("idle sync: %+v", rep)
		}
		if rep := sync(t, b, treesync.Scope{}); rep.Downloaded != 3 {
			t.Fatalf("pull into b: %+v, want 3 downloaded", rep)
		}
		wantFile(t, b, "data/m/1/out/1/raw", "one")
		wantFile(t, b, "definitions/m.yaml", "def")

		write(t, b, "data/m/1/out/1/raw", "ONE")
		os.Remove(filepath.Join(b.Dir(), "data/m/1/out/2/raw"))
		if rep := sync(t, b, treesync.Scope{}); rep.Committed != 2 || rep.Dirty != 2 || rep.Downloaded != 0 {
			t.Fatalf("push from b: %+v, want 2 committed (one put, one delete)", rep)
		}
		wantRemote(t, s, "data/m/1/out/1/raw", "ONE")
		wantRemote(t, s, "data/m/1/out/2/raw", "")
		rep := sync(t, a, treesync.Scope{})
		if rep.Downloaded != 1 || rep.Removed != 1 || rep.Committed != 0 {
			t.Fatalf("pull into a: %+v, want one download and one removal", rep)
		}
		wantFile(t, a, "data/m/1/out/1/raw", "ONE")
		if _, ok := read(t, a, "data/m/1/out/2/raw"); ok {
			t.Fatal("a pulled delete left the file")
		}
		// b's own commit does not come back to it as a download.
		if rep := sync(t, b, treesync.Scope{}); rep.Downloaded != 0 || rep.Committed != 0 {
			t.Fatalf("b after its own push: %+v", rep)
		}
	})
}

func TestConflicts(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		a := newTree(t, s, nil)
		write(t, a, "data/m/1/f", "base")
		write(t, a, "data/m/1/g", "base-g")
		sync(t, a, treesync.Scope{})
		trees := map[treesync.Prefer]*treesync.Tree{}
		for _, p := range []treesync.Prefer{treesync.PreferNone, treesync.PreferLocal, treesync.PreferRemote} {
			trees[p] = newTree(t, s, &treesync.Options{Prefer: p})
			sync(t, trees[p], treesync.Scope{})
		}
		write(t, a, "data/m/1/f", "from a")
		sync(t, a, treesync.Scope{})

		none := trees[treesync.PreferNone]
		write(t, none, "data/m/1/f", "from none")
		write(t, none, "data/m/1/new", "new")
		_, err := none.Sync(t.Context(), treesync.Scope{})
		var ce *treesync.ConflictError
		if !errors.As(err, &ce) || !errors.Is(err, metastore.ErrConflict) || !slices.Equal(ce.Paths, []string{"data/m/1/f"}) {
			t.Fatalf("sync with a conflict: %v, want a ConflictError naming data/m/1/f", err)
		}
		wantRemote(t, s, "data/m/1/f", "from a")
		wantRemote(t, s, "data/m/1/new", "")
		wantFile(t, none, "data/m/1/f", "from none")

		remote := trees[treesync.PreferRemote]
		write(t, remote, "data/m/1/f", "from remote-preferrer")
		rep := sync(t, remote, treesync.Scope{})
		if !slices.Equal(rep.Resolved, []string{"data/m/1/f"}) || rep.Committed != 0 {
			t.Fatalf("prefer remote: %+v", rep)
		}
		wantFile(t, remote, "data/m/1/f", "from a")

		local := trees[treesync.PreferLocal]
		write(t, local, "data/m/1/f", "from local-preferrer")
		if rep := sync(t, local, treesync.Scope{}); rep.Committed != 1 {
			t.Fatalf("prefer local: %+v", rep)
		}
		wantRemote(t, s, "data/m/1/f", "from local-preferrer")

		// A delete against a remote change is a conflict too.
		os.Remove(filepath.Join(a.Dir(), "data/m/1/f"))
		if _, err := a.Sync(t.Context(), treesync.Scope{}); !errors.As(err, &ce) {
			t.Fatalf("delete against a remote change: %v, want a conflict", err)
		}
		wantRemote(t, s, "data/m/1/f", "from local-preferrer")
	})
}

// TestScopedPullCannotPoisonTheUnscopedPosition reproduces seed 004's
// scenario: worker 1 pulls everything, worker 2 changes model B, worker 3
// changes model A after it, worker 1 pulls only model A (scoped), then
// everything. With a single timestamp watermark that the scoped pull
// advanced, the unscoped pull would skip B's change (the negative control
// below shows it on the same feed); here it cannot.
func TestScopedPullCannotPoisonTheUnscopedPosition(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		w1, w2, w3 := newTree(t, s, nil), newTree(t, s, nil), newTree(t, s, nil)
		write(t, w2, "data/a/1/f", "a0")
		write(t, w2, "data/b/1/f", "b0")
		sync(t, w2, treesync.Scope{})
		sync(t, w1, treesync.Scope{})
		sync(t, w3, treesync.Scope{})
		cursor0, _, _, err := w1.Positions()
		if err != nil {
			t.Fatal(err)
		}

		write(t, w2, "data/b/1/f", "b1") // B changes first
		sync(t, w2, treesync.Scope{Models: []string{"b/1"}})
		write(t, w3, "data/a/1/f", "a1") // then A
		sync(t, w3, treesync.Scope{Models: []string{"a/1"}})

		// The negative control: the seed's watermark, "everything as of
		// time T", advanced by the scoped pull to A's change time.
		aChange, _, _ := s.Changes(t.Context(), "a/1", 1, 10)
		bChange, _, _ := s.Changes(t.Context(), "b/1", 1, 10)
		watermark := aChange[0].Time
		if !bChange[0].Time.Before(watermark) {
			t.Fatalf("control: B's change (%v) should precede A's (%v)", bChange[0].Time, watermark)
		}
		// A full pull "changed since the watermark" would skip B's change:
		// that is the poisoning, and the reason a scoped pull must not move
		// the unscoped position.

		rep := sync(t, w1, treesync.Scope{Models: []string{"a/1"}})
		if rep.Downloaded != 1 {
			t.Fatalf("scoped pull: %+v", rep)
		}
		wantFile(t, w1, "data/a/1/f", "a1")
		wantFile(t, w1, "data/b/1/f", "b0") // not in scope: untouched
		cursor1, _, pos, err := w1.Positions()
		if err != nil {
			t.Fatal(err)
		}
		if cursor1 != cursor0 {
			t.Fatal("a scoped pull moved the unscoped cursor")
		}
		if pos["b/1"] != 1 || pos["a/1"] != 2 {
			t.Fatalf("positions after the scoped pull: %v; want a/1 at 2 and b/1 still at 1", pos)
		}
		rep = sync(t, w1, treesync.Scope{})
		wantFile(t, w1, "data/b/1/f", "b1")
		if rep.Downloaded != 1 {
			t.Fatalf("unscoped pull after the scoped one: %+v, want B's change downloaded", rep)
		}
	})
}

func TestMarkDirtyHints(t *testing.T) {
	s := boltStore(t)
	a := newTree(t, s, nil)
	write(t, a, "data/m/1/x", "x0")
	write(t, a, "data/m/1/y", "y0")
	sync(t, a, treesync.Scope{})
	write(t, a, "data/m/1/x", "x1")
	write(t, a, "data/m/1/y", "y1")
	if err := a.MarkDirty("data/m/1/x"); err != nil {
		t.Fatal(err)
	}
	if rep := sync(t, a, treesync.Scope{}); rep.Committed != 1 || rep.Dirty != 1 {
		t.Fatalf("sync with one hint: %+v, want only the hinted path", rep)
	}
	wantRemote(t, s, "data/m/1/x", "x1")
	wantRemote(t, s, "data/m/1/y", "y0")
	// No hints now: the walk finds the other.
	if rep := sync(t, a, treesync.Scope{}); rep.Committed != 1 {
		t.Fatalf("sync after the hints: %+v", rep)
	}
	wantRemote(t, s, "data/m/1/y", "y1")

	// Overflowing hints fall back to the walk.
	b := newTree(t, s, &treesync.Options{MaxHints: 1})
	sync(t, b, treesync.Scope{})
	write(t, b, "data/m/1/x", "x2")
	write(t, b, "data/m/1/y", "y2")
	if err := b.MarkDirty("data/m/1/x", "data/m/1/y", "data/m/1/z"); err != nil {
		t.Fatal(err)
	}
	if rep := sync(t, b, treesync.Scope{}); rep.Committed != 2 {
		t.Fatalf("sync with overflowing hints: %+v", rep)
	}
	if err := b.MarkDirty("../escape"); !errors.Is(err, metastore.ErrInvalidKey) {
		t.Fatalf("MarkDirty(../escape): %v", err)
	}
}

func TestRun(t *testing.T) {
	s := boltStore(t)
	a := newTree(t, s, nil)
	var token lock.Token
	rep, err := a.Run(t.Context(), treesync.Scope{}, func(ctx context.Context, ls *lock.Lease) error {
		token = ls.Token()
		return os.WriteFile(filepath.Join(a.Dir(), "result"), []byte("ok"), 0o644)
	}, treesync.RunOptions{})
	if err != nil || rep.Committed != 1 || rep.Token != token {
		t.Fatalf("Run: %+v, %v", rep, err)
	}
	wantRemote(t, s, "result", "ok")
	boom := errors.New("boom")
	_, err = a.Run(t.Context(), treesync.Scope{}, func(ctx context.Context, ls *lock.Lease) error {
		os.WriteFile(filepath.Join(a.Dir(), "result"), []byte("half"), 0o644)
		return boom
	}, treesync.RunOptions{})
	if !errors.Is(err, boom) {
		t.Fatalf("failed Run: %v", err)
	}
	wantRemote(t, s, "result", "ok")
	st, err := a.Status(t.Context(), treesync.Scope{})
	if err != nil || len(st.Local) != 1 || st.Local[0].Kind != treesync.Modified {
		t.Fatalf("status after a failed run: %+v, %v", st, err)
	}
	_, err = a.Run(t.Context(), treesync.Scope{}, func(ctx context.Context, ls *lock.Lease) error { return boom }, treesync.RunOptions{PushOnFailure: true})
	if !errors.Is(err, boom) {
		t.Fatalf("failed Run with PushOnFailure: %v", err)
	}
	wantRemote(t, s, "result", "half")
}

// TestLostLockCommitsNothing breaks the lock while the work runs: the
// commit is refused by the store's fence.
func TestLostLockCommitsNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		a := newTree(t, s, nil)
		l, err := lock.New(dslock.New(s), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Run(t.Context(), treesync.Scope{}, func(ctx context.Context, ls *lock.Lease) error {
			if err := l.ForceRelease(t.Context(), a.LockName(), ls.Token()); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(a.Dir(), "f"), nil, 0o644)
		}, treesync.RunOptions{})
		if !errors.Is(err, metastore.ErrConflict) {
			t.Fatalf("Run after its lock was broken: %v, want a conflict", err)
		}
		wantRemote(t, s, "f", "")
	})
}

func TestStatus(t *testing.T) {
	s := boltStore(t)
	a, b := newTree(t, s, nil), newTree(t, s, nil)
	write(t, a, "data/m/1/f", "f0")
	write(t, a, "data/m/1/g", "g0")
	sync(t, a, treesync.Scope{})
	sync(t, b, treesync.Scope{})
	write(t, a, "data/m/1/f", "f1")
	sync(t, a, treesync.Scope{})
	write(t, b, "data/m/1/f", "f-b")
	write(t, b, "data/m/1/h", "h")
	st, err := b.Status(t.Context(), treesync.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Local) != 2 || len(st.Remote) != 1 || !slices.Equal(st.Conflicts, []string{"data/m/1/f"}) {
		t.Fatalf("status: %+v", st)
	}
	// Status changed nothing: the same answer again.
	if st2, _ := b.Status(t.Context(), treesync.Scope{}); len(st2.Remote) != 1 {
		t.Fatalf("second status: %+v", st2)
	}
}

// TestResyncPastTheHorizon: a tree whose position lies below the
// partition's tombstone floor reads the partition whole, and a delete it
// never saw still removes the local file.
func TestResyncPastTheHorizon(t *testing.T) {
	s := boltStore(t)
	a, b := newTree(t, s, nil), newTree(t, s, nil)
	write(t, a, "data/m/1/keep", "k")
	write(t, a, "data/m/1/gone", "g")
	sync(t, a, treesync.Scope{})
	sync(t, b, treesync.Scope{})
	os.Remove(filepath.Join(a.Dir(), "data/m/1/gone"))
	write(t, a, "data/m/1/keep", "k2")
	sync(t, a, treesync.Scope{})
	s.SetClock(func() time.Time { return time.Now().Add(2 * datastore.DefaultHorizon) })
	if st, err := s.Reclaim(t.Context(), datastore.ReclaimOptions{}); err != nil || st.Tombstones != 1 {
		t.Fatalf("Reclaim: %+v, %v", st, err)
	}
	s.SetClock(time.Now)
	sync(t, b, treesync.Scope{Models: []string{"m/1"}})
	wantFile(t, b, "data/m/1/keep", "k2")
	if _, ok := read(t, b, "data/m/1/gone"); ok {
		t.Fatal("a delete purged past the horizon was not applied by the resync")
	}
}

package treesync_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/treesync"
)

// TestQuietSyncTakesNoLock: a sync with nothing to push that reads nothing
// new ends without the lock (it completes while another tree holds it);
// a commit by another tree, a skipped path, a changed lifecycle policy and
// an orphaned model whose retention ran out each send the next sync down
// the locked path, which does what is due.
func TestQuietSyncTakesNoLock(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		ctx := t.Context()
		a := newTree(t, s, &treesync.Options{Namespace: "q"})
		b := newTree(t, s, &treesync.Options{Namespace: "q"})
		write(t, a, "data/m/1/model.yaml", "type: m\n")
		write(t, a, "data/m/1/out/1/raw", "one")
		if rep := sync(t, a, treesync.Scope{}); rep.Unlocked || rep.Committed != 2 {
			t.Fatalf("a sync that commits: %+v", rep)
		}
		rep := sync(t, a, treesync.Scope{})
		if !rep.Unlocked || rep.Token != 0 || rep.Committed != 0 {
			t.Fatalf("a sync with nothing changed took the lock: %+v", rep)
		}
		if rep := sync(t, a, treesync.Scope{Models: []string{"m/1"}}); !rep.Unlocked {
			t.Fatalf("a scoped sync with nothing changed took the lock: %+v", rep)
		}

		// While b holds the lock, a quiet sync of a does not wait for it.
		if _, err := b.Run(ctx, treesync.Scope{}, func(ctx context.Context, _ *lock.Lease) error {
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			rep, err := a.Sync(qctx, treesync.Scope{})
			if err != nil || !rep.Unlocked {
				t.Errorf("a quiet sync while the lock is held: %+v, %v", rep, err)
			}
			return nil
		}, treesync.RunOptions{}); err != nil {
			t.Fatal(err)
		}

		// Another tree's commit is pulled, under the lock.
		write(t, b, "data/m/1/out/2/raw", "two")
		sync(t, b, treesync.Scope{})
		if rep := sync(t, a, treesync.Scope{}); rep.Unlocked || rep.Downloaded != 1 {
			t.Fatalf("the sync after another tree's commit: %+v", rep)
		}
		wantFile(t, a, "data/m/1/out/2/raw", "two")
		if rep := sync(t, a, treesync.Scope{Models: []string{"m/1"}}); !rep.Unlocked {
			t.Fatalf("a scoped sync after the pull took the lock: %+v", rep)
		}

		// A changed policy: the next sync maintains under the lock.
		q, err := s.Namespace("q")
		if err != nil {
			t.Fatal(err)
		}
		const retention = 3 * time.Second
		if _, err := q.SetLifecycle(ctx, datastore.Lifecycle{Enabled: true, Retention: retention}); err != nil {
			t.Fatal(err)
		}
		if rep := sync(t, a, treesync.Scope{}); rep.Unlocked {
			t.Fatalf("the sync after the policy changed took no lock: %+v", rep)
		}
		if rep := sync(t, a, treesync.Scope{}); !rep.Unlocked {
			t.Fatalf("a quiet sync under the new policy took the lock: %+v", rep)
		}

		// A model deleted: orphaned, due after the retention. A sync with
		// nothing changed once it is due drops it, under the lock.
		if err := os.Remove(filepath.Join(a.Dir(), "data/m/1/model.yaml")); err != nil {
			t.Fatal(err)
		}
		deleted := time.Now()
		if rep := sync(t, a, treesync.Scope{}); rep.PrunedModels != 0 {
			t.Fatalf("the delete's sync pruned before the retention: %+v", rep)
		}
		// The model was orphaned by that sync's fold, at the latest when
		// it returned: due by then plus the retention (on a loaded
		// machine the fold can end well after deleted).
		orphaned := time.Now()
		sync(t, b, treesync.Scope{})
		rep = sync(t, b, treesync.Scope{})
		// Only a sync that surely ran before the retention ran out says
		// anything: a loaded machine can take the whole retention for
		// these three syncs.
		if time.Since(deleted) < retention-500*time.Millisecond && !rep.Unlocked {
			t.Fatalf("a quiet sync before the retention ran out took the lock: %+v", rep)
		}
		time.Sleep(time.Until(orphaned.Add(retention + 100*time.Millisecond)))
		if rep.PrunedModels == 0 { // else that late sync dropped it already
			if rep := sync(t, b, treesync.Scope{}); rep.Unlocked || rep.PrunedModels != 1 {
				t.Fatalf("the sync once the retention ran out: %+v; want the model dropped under the lock", rep)
			}
		}
		wantRemote(t, q, "data/m/1/out/1/raw", "")
		if _, ok := read(t, b, "data/m/1/out/1/raw"); ok {
			t.Fatal("the dropped model's file is still in the tree")
		}
		if rep := sync(t, a, treesync.Scope{}); rep.Unlocked {
			t.Fatalf("a tree whose model was dropped took no lock: %+v", rep)
		}
		if _, ok := read(t, a, "data/m/1/out/1/raw"); ok {
			t.Fatal("the dropped model's file is still in the other tree")
		}
	})
}

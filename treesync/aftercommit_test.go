package treesync_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore/dslock"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/treesync"
)

// TestLockLostAfterCommit (issue 28, row 1): a sync whose lock is broken
// after its commit stood (the catalog fold after it is refused by its
// fence) reports an AfterCommitError naming the step and the changes
// committed, not a conflict: the CLI exits 10, not 4, and a script does not
// redo a sync that took effect. The commit is visible.
func TestLockLostAfterCommit(t *testing.T) {
	s := boltStore(t)
	tr := newTree(t, s, nil)
	os.MkdirAll(filepath.Join(tr.Dir(), "data/m/1"), 0o755)
	os.WriteFile(filepath.Join(tr.Dir(), "data/m/1/f"), []byte("one"), 0o644)
	breaker, err := lock.New(dslock.New(s), nil)
	if err != nil {
		t.Fatal(err)
	}
	treesync.SetAfterCommitHook(func() {
		info, err := breaker.Inspect(t.Context(), tr.LockName())
		if err == nil {
			err = breaker.ForceRelease(t.Context(), tr.LockName(), info.Token)
		}
		if err != nil {
			t.Error(err)
		}
	})
	defer treesync.SetAfterCommitHook(nil)
	rep, err := tr.Sync(t.Context(), treesync.Scope{})
	var ac *treesync.AfterCommitError
	if !errors.As(err, &ac) {
		t.Fatalf("sync with its lock broken after the commit: %v, want an AfterCommitError", err)
	}
	if ac.Committed != 1 || rep.Committed != 1 || ac.Step != "catalog fold" {
		t.Errorf("AfterCommitError %+v, report committed %d; want 1 change and the catalog fold", ac, rep.Committed)
	}
	if !errors.Is(err, metastore.ErrConflict) || !strings.Contains(err.Error(), "the commit stood") || strings.Count(err.Error(), "lake: ") != 1 {
		t.Errorf("error %q: want the fold's conflict as its cause, said to follow a commit that stood", err)
	}
	if info, err := s.Stat(t.Context(), "data/m/1/f"); err != nil || info.Size != 3 {
		t.Errorf("the committed file: %+v, %v", info, err)
	}
}

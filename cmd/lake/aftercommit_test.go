package main

import (
	"testing"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/treesync"
)

// TestAfterCommitExit (issue 28): a sync whose commit stood exits 10 when a
// step after it failed, even when that step's cause is a conflict (a fold
// refused by its fence), never 4, which says nothing was committed.
func TestAfterCommitExit(t *testing.T) {
	err := &treesync.AfterCommitError{Committed: 1, Step: "catalog fold", Err: metastore.Conflict("rec/default/sync", "fence")}
	if got := exitCode(err); got != exitAfterCommit {
		t.Errorf("exitCode(after-commit conflict) = %d, want %d", got, exitAfterCommit)
	}
	if got := exitCode(metastore.Conflict("k", "r")); got != exitConflict {
		t.Errorf("exitCode(conflict) = %d, want %d", got, exitConflict)
	}
}

package boltfs_test

import (
	"testing"

	"github.com/lakemeta/lake/datastore/dslock"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/lock/locktest"
)

// TestLockStorage runs the lock package's suite on the datastore's own
// records, through datastore.LockStorage.
func TestLockStorage(t *testing.T) {
	locktest.RunStorageTests(t, func(t *testing.T) lock.Storage { return dslock.New(newStore(t)) })
}

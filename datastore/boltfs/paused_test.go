package boltfs_test

import (
	"path/filepath"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/datastore/dstest"
)

// TestPausedHolderAtEveryRequest (issue 28, item 1, on bolt): the paused
// takeover of dstest, A paused before each call its commit makes to the
// driver (a bolt file has no requests to hold).
func TestPausedHolderAtEveryRequest(t *testing.T) {
	d, err := boltfs.Open(filepath.Join(t.TempDir(), "lake.db"), &boltfs.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	sB := datastore.New(d)
	t.Cleanup(func() { sB.Close() })
	var p dstest.Pauser
	dstest.RunPausedTakeover(t, datastore.New(dstest.PausingDriver(d, &p)), sB, &p)
}

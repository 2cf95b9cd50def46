package boltfs_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/internal/boltfile"
	"github.com/lakemeta/lake/internal/boltfile/bolttest"
)

// TestCheckOfAnEmptyNamespace (issue 28): a check of a namespace nothing
// was written to (its buckets do not exist yet) finds nothing, and the
// file keeps serving; it used to call a nil bucket, which the file's guard
// took for a damaged page, poisoning the store, a node's included. A
// bucket deleted by another writer of the file is reported, never a panic.
func TestCheckOfAnEmptyNamespace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lake.db")
	d, err := boltfs.Open(path, &boltfs.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	root := datastore.New(d)
	ctx := t.Context()
	alpha, err := root.Namespace("alpha")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := alpha.Check(ctx, datastore.CheckOptions{Chunks: true})
	if err != nil || len(rep.Problems) != 0 || rep.Objects != 0 {
		t.Fatalf("check of an empty namespace: %+v, %v", rep, err)
	}
	if _, err := alpha.Put(ctx, "data/m/1/a", strings.NewReader("a"), nil); err != nil {
		t.Fatalf("a put after the check: %v", err)
	}
	root.Close()

	bolttest.Update(t, path, func(tx *boltfile.Tx) error {
		return tx.Bucket([]byte("datastore.ns")).Bucket([]byte("alpha")).DeleteBucket([]byte("datastore.heads"))
	})
	d, err = boltfs.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	root = datastore.New(d)
	defer root.Close()
	alpha, _ = root.Namespace("alpha")
	rep, err = alpha.Check(ctx, datastore.CheckOptions{})
	if err != nil || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].String(), "datastore.heads/: missing") {
		t.Fatalf("check with the heads bucket deleted: %v, %v", rep.Problems, err)
	}
	if _, _, err := alpha.Get(ctx, "data/m/1/a"); err != nil {
		t.Errorf("a get after the check: %v", err)
	}
}

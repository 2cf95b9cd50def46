package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/metastore"
)

// TestRememberedLayoutStale (issue 31): a tree remembers its datastore's
// layout so that a sync that finds nothing changed need not read it; a
// datastore deleted and recreated under the same URL with another layout
// must not be read with the remembered one. Here the recreated datastore
// records type-id (a second client writes the record before any lake
// process opens it), and holds data/a/b/c/d/1/raw, which is in partition
// a/b under type-id but a/b/c under the models layout the tree remembers:
// a sync that trusted it would look for the file in the wrong partition
// and never pull it.
func TestRememberedLayoutStale(t *testing.T) {
	dir, tree := t.TempDir(), t.TempDir()
	db := filepath.Join(dir, "lake.db")
	store := "bolt://" + db
	lake := func(wd string, args ...string) result {
		t.Helper()
		return run(t, wd, "", append([]string{"--store", store}, args...)...)
	}
	ok(t, lake(dir, "data", "init"))
	ok(t, lake(tree, "data", "sync"))
	ok(t, lake(tree, "data", "sync")) // quiet: no record read
	if b, err := os.ReadFile(filepath.Join(tree, ".lake", "layout")); err != nil || string(b) != "models" {
		t.Fatalf("the tree remembers %q (%v), want models", b, err)
	}

	// The datastore is deleted and made again, by another client, with
	// the type-id layout.
	recreateWithLayout(t, db, "type-id")
	src := filepath.Join(dir, "raw")
	if err := os.WriteFile(src, []byte("pulled\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, lake(dir, "data", "put", "data/a/b/c/d/1/raw", src))
	if r := ok(t, lake(dir, "data", "stat", "data/a/b/c/d/1/raw")); !strings.Contains(r.stdout, `"partition":"a/b"`) {
		t.Fatalf("the recreated datastore files it elsewhere: %s", r.stdout)
	}

	ok(t, lake(tree, "data", "sync"))
	if b, err := os.ReadFile(filepath.Join(tree, "data", "a", "b", "c", "d", "1", "raw")); err != nil || string(b) != "pulled\n" {
		t.Fatalf("the sync after the datastore was recreated pulled %q (%v), want the file", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(tree, ".lake", "layout")); err != nil || string(b) != "type-id" {
		t.Fatalf("the tree remembers %q (%v), want type-id", b, err)
	}
	// And a local change is committed in the recreated datastore's
	// partitions.
	if err := os.WriteFile(filepath.Join(tree, "data", "a", "b", "c", "d", "1", "raw"), []byte("pushed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, lake(tree, "data", "sync"))
	if r := ok(t, lake(dir, "data", "stat", "data/a/b/c/d/1/raw")); !strings.Contains(r.stdout, `"partition":"a/b"`) || !strings.Contains(r.stdout, `"pos":2`) {
		t.Fatalf("the pushed change: %s", r.stdout)
	}
}

// recreateWithLayout deletes the bolt datastore db and makes it again as
// another client would, recording layout before any lake process opens it.
func recreateWithLayout(t *testing.T, db, layout string) {
	t.Helper()
	if err := os.Remove(db); err != nil {
		t.Fatal(err)
	}
	d, err := boltfs.Open(db, &boltfs.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := datastore.New(d).Records().CASRecord(t.Context(), datastore.LayoutKey, metastore.ExpectAbsent(), []byte(layout)); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

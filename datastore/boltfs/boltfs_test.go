package boltfs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/datastore/dstest"
	"github.com/lakemeta/lake/metastore/boltstore"
)

func newStore(t *testing.T) *datastore.Store {
	d, err := boltfs.Open(filepath.Join(t.TempDir(), "lake.db"), &boltfs.Options{Create: true, MaxCommit: 40})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	dstest.RunConformanceTests(t, newStore)
}

// TestSharesTheMetastoreFile opens the datastore in a file the bolt
// metastore made and then the metastore again: each keeps its own buckets.
func TestSharesTheMetastoreFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lake.db")
	ms, err := boltstore.Open(path, &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := ms.Put(t.Context(), "tbl/orders", []byte("v")); err != nil {
		t.Fatal(err)
	}
	ms.Close()
	d, err := boltfs.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	if _, err := s.Put(t.Context(), "data/m/1/f", strings.NewReader("file"), nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	ms, err = boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := ms.Get(t.Context(), "tbl/orders"); err != nil || string(v) != "v" {
		t.Fatalf("metastore key after the datastore opened the file: %q, %v", v, err)
	}
	items, _, err := ms.List(t.Context(), "", 100, nil)
	if err != nil || len(items) != 1 {
		t.Fatalf("the metastore lists %v (%v); want only its own key", items, err)
	}
	ms.Close()
	d, err = boltfs.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s = datastore.New(d)
	defer s.Close()
	if _, got, err := s.Get(t.Context(), "data/m/1/f"); err != nil || string(got) != "file" {
		t.Fatalf("datastore file after reopening: %q, %v", got, err)
	}
}

func TestKilledWriter(t *testing.T) {
	path := os.Getenv("LAKE_BOLTFS_TEST_FILE")
	if path == "" {
		path = filepath.Join(t.TempDir(), "lake.db")
		t.Setenv("LAKE_BOLTFS_TEST_FILE", path)
	}
	dstest.RunKilledWriter(t, "TestKilledWriter", func(t *testing.T) *datastore.Store {
		d, err := boltfs.Open(path, &boltfs.Options{Create: true, LockTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		s := datastore.New(d)
		t.Cleanup(func() { s.Close() })
		return s
	})
}

package remotefs_test

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/datastore/dslock"
	"github.com/lakemeta/lake/datastore/dstest"
	"github.com/lakemeta/lake/datastore/remotefs"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/lock/locktest"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/lakemeta/lake/server"
)

// node starts a node over one bolt file holding the metastore and the
// datastore, as `lake serve` does, and returns its URL.
func node(t *testing.T) string {
	url, _ := nodeWithData(t)
	return url
}

// nodeWithData is node, and the node's own datastore, to reach past it.
func nodeWithData(t *testing.T) (string, *datastore.Store) {
	ms, err := boltstore.Open(filepath.Join(t.TempDir(), "lake.db"), &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	d, err := boltfs.New(ms.File())
	if err != nil {
		t.Fatal(err)
	}
	data := datastore.New(d)
	store := metastore.New(ms)
	t.Cleanup(func() { data.Close(); store.Close() })
	srv, err := server.New(store, &server.Options{Data: data, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	url, hs, err := server.ServeLoopback(srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	return url, data
}

func open(t *testing.T, url string) *datastore.Store {
	d, err := remotefs.Open(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	dstest.RunConformanceTests(t, func(t *testing.T) *datastore.Store { return open(t, node(t)) })
}

func TestLockStorage(t *testing.T) {
	locktest.RunStorageTests(t, func(t *testing.T) lock.Storage { return dslock.New(open(t, node(t))) })
}

// TestKilledWriter: the child process writes through the parent's node.
func TestKilledWriter(t *testing.T) {
	url := os.Getenv("LAKE_REMOTEFS_TEST_NODE")
	if url == "" {
		url = node(t)
		t.Setenv("LAKE_REMOTEFS_TEST_NODE", url)
	}
	dstest.RunKilledWriter(t, "TestKilledWriter", func(t *testing.T) *datastore.Store { return open(t, url) })
}

func TestNodeWithoutDatastore(t *testing.T) {
	ms, err := boltstore.Open(filepath.Join(t.TempDir(), "lake.db"), &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	store := metastore.New(ms)
	defer store.Close()
	srv, err := server.New(store, &server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	url, hs, err := server.ServeLoopback(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	if _, err := remotefs.Open(t.Context(), url, nil); err == nil {
		t.Fatal("Open of a node without a datastore succeeded")
	}
}

package boltstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/lakemeta/lake/metastore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.RunConformanceTests(t, newStore)
}

func newStore(t *testing.T) *metastore.Store {
	d, err := boltstore.Open(filepath.Join(t.TempDir(), "lake.db"), &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s := metastore.New(d)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestOpenMissingFileWithoutCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.db")
	_, err := boltstore.Open(path, nil)
	if !errors.Is(err, boltstore.ErrMissing) {
		t.Fatalf("Open of a missing file: %v, want ErrMissing", err)
	}
	if _, statErr := os.Stat(path); !errors.Is(statErr, os.ErrNotExist) {
		t.Fatalf("Open without Create created the file")
	}
}

func TestOpenDirectory(t *testing.T) {
	_, err := boltstore.Open(t.TempDir(), &boltstore.Options{Create: true})
	if !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Fatalf("Open of a directory: %v", err)
	}
}

// TestLockedFileFailsFast: a file held by another opener fails within the
// lock timeout with ErrLocked, rather than hanging.
func TestLockedFileFailsFast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lake.db")
	first, err := boltstore.Open(path, &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	start := time.Now()
	_, err = boltstore.Open(path, &boltstore.Options{LockTimeout: 200 * time.Millisecond})
	if !errors.Is(err, boltstore.ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("second Open waited %v", waited)
	}
	first.Close()
	second, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatalf("Open after the holder closed: %v", err)
	}
	second.Close()
}

// TestDurableAcrossReopen: what was acknowledged is there after reopening.
func TestDurableAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lake.db")
	d, err := boltstore.Open(path, &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s := metastore.New(d)
	ctx := context.Background()
	for _, k := range []string{"tbl/a", "tbl/b", "x"} {
		if err := s.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	d, err = boltstore.Open(path, &boltstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	s = metastore.New(d)
	defer s.Close()
	items, err := s.ListAll(ctx, "")
	if err != nil || len(items) != 3 {
		t.Fatalf("after reopen: %v, %d items", err, len(items))
	}
	if err := s.Put(ctx, "tbl/c", nil); !errors.Is(err, metastore.ErrRefused) {
		t.Fatalf("Put on a read-only store: %v", err)
	}
}

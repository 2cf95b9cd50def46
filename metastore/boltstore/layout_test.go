package boltstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/internal/boltfile"
	"github.com/lakemeta/lake/internal/boltfile/bolttest"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
)

// Regression tests for https://github.com/lakemeta/lake/issues/11: reads
// never write, and only Create or Init change a file's layout.

// foreignFile writes a bbolt file of another program: one bucket "other".
func foreignFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "foreign.db")
	bolttest.Update(t, path, func(tx *boltfile.Tx) error {
		b, err := tx.CreateBucket([]byte("other"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	})
	return path
}

func emptyFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNotAStoreIsRefusedUnchanged: an empty file and another program's
// bbolt file are refused by every opener but Init, naming `lake init`, and
// keep their bytes.
func TestNotAStoreIsRefusedUnchanged(t *testing.T) {
	for name, mk := range map[string]func(*testing.T) string{"empty": emptyFile, "foreign": foreignFile} {
		for _, opts := range []boltstore.Options{{}, {ReadOnly: true}, {Create: true}} {
			path := mk(t)
			before := fileSum(t, path)
			_, err := boltstore.Open(path, &opts)
			if !errors.Is(err, boltstore.ErrNotStore) {
				t.Fatalf("%s, %+v: %v, want ErrNotStore", name, opts, err)
			}
			if !strings.Contains(err.Error(), " init`") {
				t.Errorf("%s: error does not name `lake init`: %v", name, err)
			}
			if fileSum(t, path) != before {
				t.Fatalf("%s, %+v: the file was changed", name, opts)
			}
		}
	}
}

// TestInitAdoptsAnEmptyOrForeignFile: Init (lake init) makes either a store
// and keeps another program's buckets.
func TestInitAdoptsAnEmptyOrForeignFile(t *testing.T) {
	ctx := context.Background()
	for name, mk := range map[string]func(*testing.T) string{"empty": emptyFile, "foreign": foreignFile} {
		path := mk(t)
		d, err := boltstore.Open(path, &boltstore.Options{Init: true})
		if err != nil {
			t.Fatalf("%s: Init: %v", name, err)
		}
		s := metastore.New(d)
		if err := s.Put(ctx, "tbl/a", []byte("1")); err != nil {
			t.Fatal(err)
		}
		s.Close()
		d, err = boltstore.Open(path, &boltstore.Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("%s: reopen after Init: %v", name, err)
		}
		d.Close()
	}
}

// TestOpeningAStoreWritesNothing: opening a store, reading and listing it,
// for reading or for writing, leaves every byte as it was.
func TestOpeningAStoreWritesNothing(t *testing.T) {
	path := bigStore(t)
	before := fileSum(t, path)
	ctx := context.Background()
	for _, opts := range []boltstore.Options{{ReadOnly: true}, {}, {Create: true}} {
		d, err := boltstore.Open(path, &opts)
		if err != nil {
			t.Fatal(err)
		}
		s := metastore.New(d)
		if _, err := s.Get(ctx, "tbl/k00042"); err != nil {
			t.Fatal(err)
		}
		if items, err := s.ListAll(ctx, "tbl/"); err != nil || len(items) != fixtureKeys {
			t.Fatalf("ListAll: %d items, %v", len(items), err)
		}
		s.Close()
		if fileSum(t, path) != before {
			t.Fatalf("opening with %+v and reading changed the file", opts)
		}
	}
}

// TestReadersShareTheFile: several read-only openers hold the file at
// once; a writer next to them, and a reader next to a writer, fail fast
// with ErrLocked.
func TestReadersShareTheFile(t *testing.T) {
	path := bigStore(t)
	var readers []*boltstore.Driver
	for range 3 {
		d, err := boltstore.Open(path, &boltstore.Options{ReadOnly: true, LockTimeout: 200 * time.Millisecond})
		if err != nil {
			t.Fatalf("reader beside readers: %v", err)
		}
		readers = append(readers, d)
	}
	if _, err := boltstore.Open(path, &boltstore.Options{LockTimeout: 200 * time.Millisecond}); !errors.Is(err, boltstore.ErrLocked) {
		t.Fatalf("writer beside readers: %v, want ErrLocked", err)
	}
	for _, d := range readers {
		d.Close()
	}
	w, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	start := time.Now()
	if _, err := boltstore.Open(path, &boltstore.Options{ReadOnly: true, LockTimeout: 200 * time.Millisecond}); !errors.Is(err, boltstore.ErrLocked) {
		t.Fatalf("reader beside a writer: %v, want ErrLocked", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("reader waited %v", waited)
	}
}

// TestReadOnlyFileCanBeRead: a file without write permission opens for
// reading.
func TestReadOnlyFileCanBeRead(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores file permissions")
	}
	path := bigStore(t)
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	d, err := boltstore.Open(path, &boltstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a read-only file: %v", err)
	}
	d.Close()
}

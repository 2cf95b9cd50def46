// Package bolttest reaches a bbolt file as another program would, without
// lake's checks and guard: to write fixtures (many keys in one transaction,
// another program's buckets) and to find pages to damage. Tests only.
package bolttest

import (
	"os"
	"slices"
	"testing"

	"github.com/lakemeta/lake/internal/boltfile"
	bolt "go.etcd.io/bbolt"
)

// Update opens the file at path with plain bbolt (creating it if missing),
// runs fn in one write transaction and closes the file.
func Update(t testing.TB, path string, fn func(tx *boltfile.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// Pages returns the ids of the pages of the given bbolt types ("leaf",
// "branch", "freelist"; every type if none) below the high-water mark of
// the sound file at path.
func Pages(t testing.TB, path string, types ...string) []int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil) // tx.Page needs the freelist a writer loads
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ids []int
	err = db.View(func(tx *bolt.Tx) error {
		for id := 2; id < int(tx.Size())/db.Info().PageSize; id++ {
			info, err := tx.Page(id)
			if err != nil {
				return err
			}
			if info != nil && (len(types) == 0 || slices.Contains(types, info.Type)) {
				ids = append(ids, id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// HighWater returns the length in use of the sound file at path: bbolt
// grows a file ahead of its high-water mark.
func HighWater(t testing.TB, path string) int64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var size int64
	db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil })
	return size
}

// RepeatChild makes branch page id of the file at path (4 KiB pages) name
// its first child twice: the second element's page id becomes the first's.
// The tree stays acyclic, so Open accepts it, but a cursor walks the first
// child's keys twice, the second time after larger ones.
func RepeatChild(t testing.TB, path string, id int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Branch elements follow the 16-byte page header, 16 bytes each:
	// pos u32, ksize u32, pgid u64.
	first := make([]byte, 8)
	if _, err := f.ReadAt(first, int64(id)*4096+16+8); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(first, int64(id)*4096+16+16+8); err != nil {
		t.Fatal(err)
	}
}

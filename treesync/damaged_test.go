package treesync_test

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/treesync"
)

// TestDamagedFileSkippedRestSynced (issues 26 and 27): a foreign writer
// commits a file whose bytes do not match its SHA-256 (the driver, not the
// Store, so nothing proves it); a pull names that one path, leaves the
// tree's copy alone, and syncs everything else.
func TestDamagedFileSkippedRestSynced(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		d := s.Driver()
		var v [16]byte
		rand.Read(v[:])
		st := datastore.Staged{Path: "data/m/1/bad", Version: hex.EncodeToString(v[:]), Size: 5, Chunks: 1,
			SHA256: "00" + hex.EncodeToString(make([]byte, 31)), Meta: []byte{}, Started: s.Now()}
		if err := d.BeginUpload(t.Context(), st); err != nil {
			t.Fatal(err)
		}
		if err := d.PutChunk(t.Context(), st.Version, 0, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Commit(t.Context(), nil, []datastore.Entry{{Put: &st}}, s.Now()); err != nil {
			t.Fatal(err)
		}
		put(t, s, "data/m/1/good", "fine")
		tr := newTree(t, s, nil)
		syncPartial(t, tr, "data/m/1/bad")
		wantFile(t, tr, "data/m/1/good", "fine")
		if _, ok := read(t, tr, "data/m/1/bad"); ok {
			t.Fatal("the damaged file was written into the tree")
		}
	})
}

// TestDamagedMirrorRebuilt: a catalog mirror (.lake/catalog.json) that
// does not decode no longer stops the sync before its push: the sync
// removes it, reads the catalog whole as a new tree does, says so in a
// warning, and commits; the mirror holds every namespace's rows again and
// the next sync warns of nothing.
func TestDamagedMirrorRebuilt(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		other := newTree(t, s, &treesync.Options{Namespace: "other"})
		write(t, other, "data/o/1/f", "o")
		syncPartial(t, other)
		a := newTree(t, s, nil)
		write(t, a, "data/m/1/f", "f0")
		syncPartial(t, a)
		mirror := filepath.Join(a.Dir(), treesync.StateDir, treesync.CatalogFile)
		if err := os.WriteFile(mirror, []byte("garbage\x00"), 0o644); err != nil {
			t.Fatal(err)
		}
		write(t, a, "data/m/1/f", "f1")
		rep := syncPartial(t, a)
		if rep.Committed != 1 || len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "did not decode") {
			t.Fatalf("the sync over a damaged mirror: %+v, want its commit and one warning", rep)
		}
		wantRemote(t, s, "data/m/1/f", "f1")
		rows, err := a.Catalog()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := rows["other/o/1"]; !ok || len(rows) != 2 {
			t.Fatalf("the mirror after the rebuild: %v, want both namespaces' rows", rows)
		}
		write(t, a, "data/m/1/f", "f2")
		if rep := syncPartial(t, a); rep.Committed != 1 || len(rep.Warnings) != 0 {
			t.Fatalf("the next sync: %+v", rep)
		}
	})
}

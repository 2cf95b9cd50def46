package treesync_test

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/lakemeta/lake/datastore"
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

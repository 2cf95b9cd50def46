package remotefs_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// TestNodeRefusesReservedAndClashingPaths: a client that skips the Store's
// checks (the driver called directly, as raw HTTP would) still meets them
// at the node: a path with a .lake segment is refused as reserved (400),
// and a commit whose own files clash is a conflict naming both (409)
// (issue 27).
func TestNodeRefusesReservedAndClashingPaths(t *testing.T) {
	s := open(t, node(t))
	d := s.Driver()
	for _, p := range []string{".lake/dirty", "data/t/i/.lake/state.json", "data/.LAKE/x"} {
		err := d.BeginUpload(t.Context(), datastore.Staged{Path: p, Version: "00ff", Meta: []byte{}, Started: time.Now()})
		if !errors.Is(err, metastore.ErrReservedKey) {
			t.Fatalf("BeginUpload(%q) through the node: %v, want ErrReservedKey", p, err)
		}
		_, err = d.Commit(t.Context(), nil, []datastore.Entry{{Delete: p}}, time.Now())
		if !errors.Is(err, metastore.ErrReservedKey) {
			t.Fatalf("Commit(delete %q) through the node: %v, want ErrReservedKey", p, err)
		}
	}
	a := datastore.Staged{Path: "data/t/i/a", Version: "01", Meta: []byte{}, Started: time.Now()}
	b := datastore.Staged{Path: "data/t/i/a/b", Version: "02", Meta: []byte{}, Started: time.Now()}
	_, err := d.Commit(t.Context(), nil, []datastore.Entry{{Put: &a}, {Put: &b}}, time.Now())
	if c, ok := datastore.AsClash(err); !ok || c.Path != "data/t/i/a/b" || c.Other != "data/t/i/a" {
		t.Fatalf("a clashing commit through the node: %v, want the clash of data/t/i/a/b with data/t/i/a", err)
	}
}

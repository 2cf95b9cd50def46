package dstest

import (
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
)

// SparsePositions is the optional ability of a driver whose partition logs
// take positions for writes that change no path: on S3 a takeover's fence
// entry, and a model's directory claim in the partition above it or a
// guard in its own (s3fs/claims.go) each take one. Positions still only
// grow and still order a partition's changes; they are not dense there. A
// driver without it is held to dense positions: the n-th change of a
// partition is at n.
type SparsePositions interface {
	PositionsSparse() bool
}

// sparse reports whether s's driver may leave positions between changes.
func sparse(s *datastore.Store) bool {
	sp, ok := s.Driver().(SparsePositions)
	return ok && sp.PositionsSparse()
}

// feedIs checks a feed read (its changes and upTo) against want, "PATH@POS
// …", and n, the position of its last change: exactly on a dense driver;
// on a sparse one, the same paths in the same order, at increasing
// positions, upTo at least n.
func feedIs(t *testing.T, s *datastore.Store, what string, ch []datastore.Info, upTo uint64, want string, n uint64) {
	t.Helper()
	got := paths(ch)
	if !sparse(s) {
		if got != want || upTo != n {
			t.Fatalf("%s = %s up to %d, want %s up to %d", what, got, upTo, want, n)
		}
		return
	}
	var names []string
	for _, w := range strings.Fields(want) {
		names = append(names, w[:strings.LastIndex(w, "@")]) // paths may hold @

	}
	var last uint64
	for i, c := range ch {
		if i >= len(names) || c.Path != names[i] || c.Pos <= last {
			t.Fatalf("%s = %s up to %d, want %s in that order at increasing positions (positions are sparse on %s)", what, got, upTo, want, s.Driver().Name())
		}
		last = c.Pos
	}
	if len(ch) != len(names) || upTo < last {
		t.Fatalf("%s = %s up to %d, want %s (positions sparse on %s)", what, got, upTo, want, s.Driver().Name())
	}
}

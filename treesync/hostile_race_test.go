package treesync_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	gosync "sync"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/treesync"
)

// TestConcurrentTreesBesideAForeignWriter: four trees sync in loops, each
// pushing its own files, one of them with a link to the outside, while a
// foreign writer keeps putting entries under .lake and below the link's
// path. Every sync either succeeds or skips (never fails), nothing appears
// outside, no tree's state directory holds anything but its own files, and
// every tree ends with every other tree's files (run with -race).
func TestConcurrentTreesBesideAForeignWriter(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		out := outside(t)
		const trees, rounds = 4, 5
		var ts []*treesync.Tree
		for range trees {
			ts = append(ts, newTree(t, s, nil))
		}
		symlink(t, ts[0], "data/sym", out)
		errs := make(chan error, trees*rounds+1)
		var foreign, workers gosync.WaitGroup
		stop := make(chan struct{})
		foreign.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				for _, err := range []error{
					foreignPutErr(t.Context(), s, fmt.Sprintf(".lake/dirty%d", i%3), "data/nothing\n"),
					foreignPutErr(t.Context(), s, "data/w/0/.lake/state.json", "{}"),
					foreignPutErr(t.Context(), s, fmt.Sprintf("data/sym/pwned%d", i%3), "pwned"),
				} {
					if err != nil {
						errs <- fmt.Errorf("foreign writer: %w", err)
						return
					}
				}
			}
		})
		for w, tr := range ts {
			workers.Go(func() {
				for r := range rounds {
					os.MkdirAll(filepath.Join(tr.Dir(), fmt.Sprintf("data/w/%d", w)), 0o755)
					os.WriteFile(filepath.Join(tr.Dir(), fmt.Sprintf("data/w/%d/r%d", w, r)), []byte("x"), 0o644)
					if _, err := tr.Sync(t.Context(), treesync.Scope{}); err != nil && !errors.Is(err, treesync.ErrPartial) {
						errs <- fmt.Errorf("tree %d round %d: %w", w, r, err)
						return
					}
				}
			})
		}
		workers.Wait()
		close(stop)
		foreign.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if t.Failed() {
			return
		}
		for _, tr := range ts {
			if _, err := tr.Sync(t.Context(), treesync.Scope{}); err != nil && !errors.Is(err, treesync.ErrPartial) {
				t.Fatal(err)
			}
			for w := range trees {
				for r := range rounds {
					wantFile(t, tr, fmt.Sprintf("data/w/%d/r%d", w, r), "x")
				}
			}
			ents, err := os.ReadDir(filepath.Join(tr.Dir(), ".lake"))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				// heads: the heads an S3 sync kept (headseed.go).
				if !slices.Contains([]string{"state.json", "catalog.json", "lock", "layout", "lockrecord", "heads"}, e.Name()) {
					t.Errorf("%s/.lake holds %s", tr.Dir(), e.Name())
				}
			}
			if _, err := os.Stat(filepath.Join(tr.Dir(), "data/w/0/.lake")); err == nil {
				t.Errorf("%s: data/w/0/.lake was pulled", tr.Dir())
			}
		}
		if ents, _ := os.ReadDir(out); len(ents) != 1 {
			t.Fatalf("outside holds %d entries, want only its secret", len(ents))
		}
	})
}

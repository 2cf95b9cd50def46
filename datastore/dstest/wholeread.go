package dstest

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lakemeta/lake/datastore"
)

// WholeReads is the optional ability of a driver some of whose reads of
// several paths may see a commit that lands meanwhile in part: it names
// which of "stat" (StatMany of up to 100 paths) and "list" (one page of a
// partition) are snapshots. A driver without it is taken to read both
// whole; the tests skip the others, saying so.
type WholeReads interface {
	ReadsWhole(kind string) bool
}

// readsWhole reports whether s's driver promises kind whole.
func readsWhole(t *testing.T, s *datastore.Store, kind string) bool {
	if w, ok := s.Driver().(WholeReads); ok && !w.ReadsWhole(kind) {
		t.Skipf("the %s driver's %s may see a commit in flight in part (docs/datastore.md)", s.Driver().Name(), kind)
		return false
	}
	return true
}

// commitGenerations commits 30 generations of content to paths, one
// commit each, then sets done.
func commitGenerations(t *testing.T, s *datastore.Store, paths []string, done *atomic.Bool) {
	defer done.Store(true)
	for g := range 30 {
		var entries []datastore.Entry
		for _, p := range paths {
			st, err := s.Upload(t.Context(), p, strings.NewReader(fmt.Sprintf("generation %03d", g)), nil)
			if err != nil {
				t.Error(err)
				return
			}
			entries = append(entries, datastore.Entry{Put: &st})
		}
		if _, err := s.Commit(t.Context(), nil, entries); err != nil {
			t.Error(err)
			return
		}
	}
}

// testStatSeesCommitWhole: while a writer commits the same content to six
// paths in two partitions, one commit at a time, readers stat the six
// together: each Stat must see one commit whole, all six paths or none at
// one version of the content. (DynamoDB's BatchGetItem is not a snapshot
// of a transaction; a Stat of up to 100 paths reads with TransactGetItems.)
func testStatSeesCommitWhole(t *testing.T, s *datastore.Store) {
	if !readsWhole(t, s, "stat") {
		return
	}
	ctx := t.Context()
	var paths []string
	for _, m := range []string{"m/1", "m/2"} {
		for _, f := range []string{"a", "b/c", "d"} {
			paths = append(paths, "data/"+m+"/"+f)
		}
	}
	var done atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { commitGenerations(t, s, paths, &done) })
	for range 2 {
		wg.Go(func() {
			for !done.Load() {
				got, err := s.StatMany(ctx, paths)
				if err != nil {
					t.Error(err)
					return
				}
				reads.Add(1)
				if len(got) == 0 {
					continue
				}
				var first datastore.Info
				for i, p := range paths {
					in, ok := got[p]
					if !ok || in.Deleted {
						t.Errorf("a stat saw %d of the commit's %d paths (%s missing)", len(got), len(paths), p)
						return
					}
					if i == 0 {
						first = in
					} else if in.SHA256 != first.SHA256 {
						t.Errorf("a stat saw two commits: %s at %.8s, %s at %.8s", paths[0], first.SHA256, p, in.SHA256)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if reads.Load() == 0 {
		t.Fatal("no stat finished")
	}
	t.Logf("%d stats, each of one commit", reads.Load())
}

// testListSeesCommitWhole: as testStatSeesCommitWhole, with a listing of
// one partition (one page) for the stat.
func testListSeesCommitWhole(t *testing.T, s *datastore.Store) {
	if !readsWhole(t, s, "list") {
		return
	}
	ctx := t.Context()
	paths := []string{"data/m/1/a", "data/m/1/b/c", "data/m/1/d"}
	var done atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { commitGenerations(t, s, paths, &done) })
	for range 2 {
		wg.Go(func() {
			for !done.Load() {
				got, err := s.ListAll(ctx, "data/m/1/")
				if err != nil {
					t.Error(err)
					return
				}
				reads.Add(1)
				if len(got) == 0 {
					continue
				}
				if len(got) != len(paths) {
					t.Errorf("a listing saw %d of the commit's %d paths", len(got), len(paths))
					return
				}
				for _, in := range got[1:] {
					if in.SHA256 != got[0].SHA256 {
						t.Errorf("a listing saw two commits: %s at %.8s, %s at %.8s", got[0].Path, got[0].SHA256, in.Path, in.SHA256)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if reads.Load() == 0 {
		t.Fatal("no listing finished")
	}
	t.Logf("%d listings, each of one commit", reads.Load())
}

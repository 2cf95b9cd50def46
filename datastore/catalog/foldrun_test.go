package catalog

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
)

// foldRun is a fold test's namespace: the files it put in each model, the
// fold cursor its folds left, and what it checks after each fold.
type foldRun struct {
	t      *testing.T
	ns     *datastore.Store // the folding process's namespace
	name   string           // its name
	fence  *datastore.Fence
	files  map[string]int // model → files put
	n      int
	cursor string
}

func newFoldRun(t *testing.T, ns *datastore.Store, fence *datastore.Fence) *foldRun {
	return &foldRun{t: t, ns: ns, name: ns.NamespaceName(), fence: fence, files: map[string]int{}}
}

// put commits a new file of model through s (this process's namespace or
// another process's) and returns what the commit applied.
func (r *foldRun) put(s *datastore.Store, model string) []datastore.Info {
	r.t.Helper()
	r.n++
	st, err := s.Upload(r.t.Context(), fmt.Sprintf("data/%s/e/v/f%d", model, r.n), strings.NewReader("x"), nil)
	if err != nil {
		r.t.Fatal(err)
	}
	out, err := s.Commit(r.t.Context(), nil, []datastore.Entry{{Put: &st}})
	if err != nil {
		r.t.Fatal(err)
	}
	r.files[model]++
	return out
}

// pull reads the namespace's changed partitions from the fold's cursor,
// as a sync's pull does (the index read by this process).
func (r *foldRun) pull() *Pulled {
	r.t.Helper()
	heads, next, err := r.ns.ChangedPartitions(r.t.Context(), r.cursor)
	if err != nil {
		r.t.Fatal(err)
	}
	return &Pulled{From: r.cursor, Heads: heads, Next: next}
}

// fold folds from the cursor the last fold left and wants the rows of
// exactly wantRows written, each counting its model's files, and the
// changed partitions known without a read (CursorOver) as wantOver says.
func (r *foldRun) fold(o FoldOptions, wantOver bool, wantRows ...string) {
	r.t.Helper()
	o.Cursor = r.cursor
	st, err := FoldWith(r.t.Context(), r.ns, r.fence, o)
	if err != nil {
		r.t.Fatal(err)
	}
	r.cursor = st.Cursor
	var got []string
	for _, row := range st.Written {
		got = append(got, row.Model)
	}
	if st.CursorOver != wantOver || strings.Join(slices.Sorted(slices.Values(got)), ",") != strings.Join(slices.Sorted(slices.Values(wantRows)), ",") {
		r.t.Fatalf("fold: over %v, rows %v; want over %v, rows %v", st.CursorOver, got, wantOver, wantRows)
	}
	cat, err := r.ns.CatalogStore()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, m := range wantRows {
		if row, ok := readRow(r.t, cat, r.name, m); !ok || row.Files != r.files[m] {
			r.t.Fatalf("row of %s %+v (%v); want %d files", m, row, ok, r.files[m])
		}
	}
}

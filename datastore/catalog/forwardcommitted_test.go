package catalog

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dsurl"
	"github.com/lakemeta/lake/metastore"
)

// TestFoldOverOwnCommit checks that a fold told what the caller's commit
// applied (FoldOptions.Committed) brings the row forward over it without
// the feed only when the commit is the partition's only change since the
// row: another writer's commit before it or after it makes the fold read
// the feed, and the row is the same either way.
func TestFoldOverOwnCommit(t *testing.T) {
	ctx := t.Context()
	ns, fence := fencedBoltNamespace(t, "own")
	put := func(path, body string) []datastore.Info {
		t.Helper()
		st, err := ns.Upload(ctx, datastore.ModelPrefix+"m/1/"+path, bytes.NewReader([]byte(body)), nil)
		if err != nil {
			t.Fatal(err)
		}
		applied, err := ns.Commit(ctx, nil, []datastore.Entry{{Put: &st}})
		if err != nil {
			t.Fatal(err)
		}
		return applied
	}
	var cursor string
	fold := func(committed []datastore.Info, wantOwn int) Row {
		t.Helper()
		st, err := FoldWith(ctx, ns, fence, FoldOptions{Cursor: cursor, Committed: committed})
		if err != nil {
			t.Fatal(err)
		}
		cursor = st.Cursor
		if st.FromCommit != wantOwn || st.Rows != 1 {
			t.Fatalf("fold wrote %d rows, %d over the commit alone; want 1, %d", st.Rows, st.FromCommit, wantOwn)
		}
		return st.Written[0]
	}
	put("e/v1/raw", "a")
	fold(nil, 0) // the first row, from the whole feed

	own := put("e/v2/raw", "bb")
	r := fold(own, 1)
	if r.Files != 2 || r.Bytes != 3 || r.Pos != own[0].Pos {
		t.Fatalf("row %+v after its own commit", r)
	}

	// Another writer's commit before the sync's: the sync's first
	// position is not the row's next.
	put("e/v3/raw", "ccc")
	own = put("e/v4/raw", "dddd")
	r = fold(own, 0)
	if r.Files != 4 || r.Bytes != 10 {
		t.Fatalf("row %+v after another writer's commit and the sync's", r)
	}

	// Another writer's commit after the sync's: the head is not the
	// sync's last position.
	own = put("e/v5/raw", "eeeee")
	put("e/v6/raw", "ffffff")
	r = fold(own, 0)
	if r.Files != 6 || r.Bytes != 21 {
		t.Fatalf("row %+v after the sync's commit and another writer's", r)
	}

	// What another datastore's commit applied, at the very positions,
	// names a change the feed does not have: the checks pass on
	// positions alone, so the caller must pass its own commit's. A
	// commit of another partition is ignored.
	other := put("e/v7/raw", "g")
	other[0].Partition = "m/2"
	r = fold(other, 0)
	if r.Files != 7 || r.Bytes != 22 {
		t.Fatalf("row %+v after a commit told as another partition's", r)
	}
}

// TestFoldGivenRows checks a fold given the rows the caller read
// (FoldOptions.Rows) takes them instead of reading, and that a given row
// older than the catalog's (another fold wrote one since, unfenced) still
// gives the model's row at the head: it is brought forward from the older
// row over the changes since it.
func TestFoldGivenRows(t *testing.T) {
	ctx := t.Context()
	ns, fence := fencedBoltNamespace(t, "rows")
	cat, err := ns.CatalogStore()
	if err != nil {
		t.Fatal(err)
	}
	put := func(path, body string) {
		t.Helper()
		st, err := ns.Upload(ctx, datastore.ModelPrefix+"m/1/"+path, bytes.NewReader([]byte(body)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ns.Commit(ctx, nil, []datastore.Entry{{Put: &st}}); err != nil {
			t.Fatal(err)
		}
	}
	rp := RowPath("rows", "m/1")
	row := func() datastore.Info {
		t.Helper()
		info, err := cat.Stat(ctx, rp)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	put("e/v1/raw", "a")
	if _, err := Fold(ctx, ns, fence); err != nil {
		t.Fatal(err)
	}
	old := row()
	put("e/v2/raw", "bb")
	if _, err := Fold(ctx, ns, nil); err != nil { // a fold the lock does not fence
		t.Fatal(err)
	}
	put("e/v3/raw", "ccc")
	st, err := FoldWith(ctx, ns, fence, FoldOptions{Rows: map[string]datastore.Info{rp: old}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows != 1 || st.Written[0].Files != 3 || st.Written[0].Bytes != 6 {
		t.Fatalf("fold from an older row wrote %+v", st.Written)
	}
	r, err := decodeRow(row())
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := ns.Head(ctx, "m/1"); r.Files != 3 || r.Pos != h.Seq {
		t.Fatalf("row %+v, head %d", r, h.Seq)
	}
}

// fencedBoltNamespace opens namespace name of a new bolt datastore, closed
// after t, and a fence on a lock record set in it.
func fencedBoltNamespace(t *testing.T, name string) (*datastore.Store, *datastore.Fence) {
	t.Helper()
	ds, err := dsurl.Open(t.Context(), "bolt://"+filepath.Join(t.TempDir(), "lake.db"), &dsurl.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ds.Close() })
	ns, err := ds.Namespace(name)
	if err != nil {
		t.Fatal(err)
	}
	const key = "test/fold-fence"
	if err := ns.Records().CASRecord(t.Context(), key, metastore.ExpectAbsent(), []byte("t")); err != nil {
		t.Fatal(err)
	}
	return ns, &datastore.Fence{Key: key, Token: []byte("t")}
}

// TestFreshRowOverOwnCommit checks that the first row of a model the
// caller's commit began is built from that commit (FoldOptions.Committed)
// without the feed when the commit is the model's whole feed, and from
// the feed when another writer committed to the model before it; the rows
// count the same files either way.
func TestFreshRowOverOwnCommit(t *testing.T) {
	ctx := t.Context()
	ns, fence := fencedBoltNamespace(t, "fresh")
	commit := func(model string, bodies ...string) []datastore.Info {
		t.Helper()
		var entries []datastore.Entry
		for i, b := range bodies {
			st, err := ns.Upload(ctx, datastore.ModelPrefix+model+"/e/v"+string(rune('1'+i))+"/raw", bytes.NewReader([]byte(b)), nil)
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, datastore.Entry{Put: &st})
		}
		applied, err := ns.Commit(ctx, nil, entries)
		if err != nil {
			t.Fatal(err)
		}
		return applied
	}
	// m/1: begun by the commit told. m/2: another writer's commit
	// first, then the one told.
	own := commit("m/1", "a", "bb")
	commit("m/2", "c")
	own = append(own, commit("m/2", "dd", "eee")...)
	st, err := FoldWith(ctx, ns, fence, FoldOptions{Committed: own})
	if err != nil {
		t.Fatal(err)
	}
	if st.FromCommit != 1 || st.Rows != 2 {
		t.Fatalf("fold wrote %d rows, %d from the commit alone; want 2, 1 (m/1's)", st.Rows, st.FromCommit)
	}
	for _, r := range st.Written {
		want := map[string][2]int64{"m/1": {2, 3}, "m/2": {2, 5}}[r.Model] // m/2: dd over c, and eee
		if int64(r.Files) != want[0] || r.Bytes != want[1] {
			t.Fatalf("row of %s = %d files, %d bytes; want %v", r.Model, r.Files, r.Bytes, want)
		}
	}
}

package treesync_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/treesync"
)

// TestFoldFromALaggingRecord (issue 31): on S3 a sync's commit carries its
// catalog fold and mostly leaves the fold cursor's record behind (a PUT
// fewer a sync; the tree keeps the cursor its fold moved to), so the
// record lags the trees' cursors. Trees of one namespace taking turns, and a new tree
// with no cursor of its own (which folds from the record), keep every row
// what a listing of its model says: a fold from an older cursor skips the
// rows already at their heads' positions. The lag is bounded: one carried
// fold in 16 writes the record. On DynamoDB the record rides in the
// commit's transaction and keeps up; the rows are checked the same.
func TestFoldFromALaggingRecord(t *testing.T) {
	stores := append(backends[:len(backends):len(backends)], struct {
		name string
		open func(t *testing.T) *datastore.Store
	}{"s3", func(t *testing.T) *datastore.Store { s, _ := newS3Store(t, "lag"); return s }})
	for _, b := range stores {
		t.Run(b.name, func(t *testing.T) { foldFromALaggingRecord(t, b.open(t)) })
	}
}

// foldFromALaggingRecord is TestFoldFromALaggingRecord over s.
func foldFromALaggingRecord(t *testing.T, s *datastore.Store) {
	ctx := t.Context()
	ns, err := s.Namespace("lag")
	if err != nil {
		t.Fatal(err)
	}
	a := newTree(t, s, &treesync.Options{Namespace: "lag"})
	b := newTree(t, s, &treesync.Options{Namespace: "lag"})
	rows := func(models ...string) {
		t.Helper()
		for _, m := range models {
			wantListedRow(t, ns, m)
		}
	}
	write(t, a, "data/m/1/model.yaml", "type: m\n")
	write(t, a, "data/m/1/out/1/raw", "a1")
	sync(t, a, treesync.Scope{})
	write(t, a, "data/m/1/out/1/raw", "a1, again")
	sync(t, a, treesync.Scope{})
	rows("m/1")
	if s.Driver().Name() == "s3" {
		rec, err := s.Records().GetRecord(ctx, "datastore/catalog/lag")
		if err != nil {
			t.Fatal(err)
		}
		if string(rec) == foldCursorOf(t, a) {
			t.Fatal("the fold cursor's record keeps up with the tree's cursor: the case under test is not made")
		}
	}
	sync(t, b, treesync.Scope{})
	write(t, b, "data/m/2/model.yaml", "type: m\n")
	write(t, b, "data/m/2/out/1/raw", "b1")
	write(t, b, "data/m/1/out/2/raw", "b on m/1")
	sync(t, b, treesync.Scope{})
	rows("m/1", "m/2")
	write(t, a, "data/m/1/out/3/raw", "a3") // a has not pulled b's commit
	sync(t, a, treesync.Scope{})
	rows("m/1", "m/2")
	// A new tree: no cursor of its own, so its fold starts from the
	// record's.
	c := newTree(t, s, &treesync.Options{Namespace: "lag"})
	sync(t, c, treesync.Scope{})
	write(t, c, "data/m/3/model.yaml", "type: m\n")
	write(t, c, "data/m/2/out/2/raw", "c on m/2")
	sync(t, c, treesync.Scope{})
	rows("m/1", "m/2", "m/3")
	sync(t, b, treesync.Scope{})
	write(t, b, "data/m/3/out/1/raw", "b on m/3")
	sync(t, b, treesync.Scope{})
	rows("m/1", "m/2", "m/3")

	// The lag is bounded: within 16 syncs of a tree that commits, the
	// record is written with its fold (one in 16 writes it on S3).
	caught := 0
	for i := range 16 {
		write(t, b, "data/m/3/out/1/raw", fmt.Sprint("b again ", i))
		sync(t, b, treesync.Scope{})
		if rec, err := s.Records().GetRecord(ctx, "datastore/catalog/lag"); err == nil && string(rec) == foldCursorOf(t, b) {
			caught++
		}
	}
	if caught == 0 {
		t.Fatal("in 16 syncs that commit, the fold cursor's record never caught up with the tree's cursor")
	}
	if s.Driver().Name() == "s3" && caught > 2 {
		t.Fatalf("the record caught up %d times in 16 syncs: the carried folds write it every time", caught)
	}
	rows("m/1", "m/2", "m/3")
}

// foldCursorOf is the fold cursor tr's state keeps.
func foldCursorOf(t *testing.T, tr *treesync.Tree) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tr.Dir(), treesync.StateDir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		FoldCursor string `json:"foldCursor"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st.FoldCursor
}

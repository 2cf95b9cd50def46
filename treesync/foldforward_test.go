package treesync_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/treesync"
)

// TestFoldForwardsTheSyncsCommit: after the first row of a model, a sync's
// fold brings the row forward over its own commit (overwrites, new
// versions, deletes, the definition rewritten) from the states its push
// read, without listing the model, in one tree and in another of the same
// namespace; a commit of a writer that is not the sync (a foreign commit in
// a version the row has) makes the fold list the model instead; and every
// row, either way, is what a listing of the model says.
func TestFoldForwardsTheSyncsCommit(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		ctx := t.Context()
		a := newTree(t, s, &treesync.Options{Namespace: "fw"})
		a2 := newTree(t, s, &treesync.Options{Namespace: "fw"})
		ns, err := s.Namespace("fw")
		if err != nil {
			t.Fatal(err)
		}
		step := func(tr *treesync.Tree, forwarded int) {
			t.Helper()
			rep := sync(t, tr, treesync.Scope{})
			if rep.CatalogFolded != 1 || (forwarded >= 0 && rep.CatalogForwarded != forwarded) {
				t.Fatalf("the sync folded %d rows, %d brought forward; want 1, %d", rep.CatalogFolded, rep.CatalogForwarded, forwarded)
			}
			wantListedRow(t, ns, "m/x")
		}
		write(t, a, "data/m/x/model.yaml", "type: m\n")
		write(t, a, "data/m/x/notes", "a note")
		write(t, a, "data/m/x/out/1/raw", "v1")
		step(a, 1) // the first row, from the model's whole feed

		write(t, a, "data/m/x/out/1/raw", "version one, longer")
		write(t, a, "data/m/x/out/2/raw", "v2")
		step(a, 1)

		sync(t, a2, treesync.Scope{})
		if err := os.Remove(filepath.Join(a2.Dir(), "data/m/x/notes")); err != nil {
			t.Fatal(err)
		}
		write(t, a2, "data/m/x/model.yaml", "type: m\nrev: 2\n")
		step(a2, 1)

		write(t, a, "data/m/x/out/2/raw", "v2, again") // a has not pulled a2's commit
		step(a, 1)

		// Another writer commits in a version the row has: what that
		// path counted for in the row is unknown, so the model is listed.
		st, err := ns.Upload(ctx, "data/m/x/out/1/extra", strings.NewReader("foreign"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ns.Commit(ctx, nil, []datastore.Entry{{Put: &st}}); err != nil {
			t.Fatal(err)
		}
		write(t, a, "data/m/x/out/3/raw", "v3")
		step(a, 0)

		sync(t, a2, treesync.Scope{})
		write(t, a2, "data/m/x/out/3/raw", "v3, from a2")
		step(a2, 1)

		// Keep-last: the lifecycle deletes the oldest versions, and the
		// fold after it brings the row forward from the files it read
		// before deleting them.
		if _, err := ns.SetLifecycle(ctx, datastore.Lifecycle{Enabled: true, KeepLast: 2}); err != nil {
			t.Fatal(err)
		}
		sync(t, a, treesync.Scope{})
		write(t, a, "data/m/x/out/5/raw", "v5")
		rep := sync(t, a, treesync.Scope{})
		if rep.PrunedVersions == 0 || rep.CatalogFolded != 2 || rep.CatalogForwarded != 2 {
			t.Fatalf("keep-last 2 pruned %d versions; %d rows folded, %d brought forward; want some, 2, 2", rep.PrunedVersions, rep.CatalogFolded, rep.CatalogForwarded)
		}
		wantListedRow(t, ns, "m/x")
		if _, err := ns.SetLifecycle(ctx, datastore.Lifecycle{}); err != nil {
			t.Fatal(err)
		}

		// The fold cursor a tree keeps is only a guess: garbage costs a
		// second pass from the record's, never a row; none, the read.
		for _, guess := range []string{"garbage", ""} {
			setFoldCursor(t, a, guess)
			sync(t, a, treesync.Scope{})
			write(t, a, "data/m/x/out/4/raw", "v4 "+guess)
			step(a, 1)
		}
	})
}

// setFoldCursor writes cursor into tr's state as the fold cursor its last
// fold left.
func setFoldCursor(t *testing.T, tr *treesync.Tree, cursor string) {
	t.Helper()
	name := filepath.Join(tr.Dir(), treesync.StateDir, "state.json")
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if _, ok := st["foldCursor"]; !ok {
		t.Fatalf("the state keeps no fold cursor: %s", b)
	}
	st["foldCursor"] = cursor
	if b, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// wantListedRow checks model's catalog row against a listing of its files:
// files, bytes, the latest time, and each version's files, bytes and
// latest position.
func wantListedRow(t *testing.T, ns *datastore.Store, model string) {
	t.Helper()
	ctx := t.Context()
	r, ok, err := catalog.Get(ctx, ns.Root(), ns.NamespaceName(), model)
	if err != nil || !ok {
		t.Fatalf("row of %s: %v, %v", model, ok, err)
	}
	files, err := ns.ListPartitionAll(ctx, model, "")
	if err != nil {
		t.Fatal(err)
	}
	type ver struct {
		files int
		bytes int64
		pos   uint64
	}
	want := map[string]ver{}
	var n int
	var size int64
	var latest time.Time
	for _, f := range files {
		n++
		size += f.Size
		if f.Time.After(latest) {
			latest = f.Time
		}
		rest := strings.TrimPrefix(f.Path, datastore.ModelPrefix+model+"/")
		name, after, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		v, _, _ := strings.Cut(after, "/")
		w := want[name+"/"+v]
		w.files++
		w.bytes += f.Size
		w.pos = max(w.pos, f.Pos)
		want[name+"/"+v] = w
	}
	got := map[string]ver{}
	for _, e := range r.Entries {
		for _, v := range e.Versions {
			got[e.Name+"/"+v.Name] = ver{v.Files, v.Bytes, v.Pos}
		}
	}
	if r.Files != n || r.Bytes != size || !r.Updated.Equal(latest) || len(got) != len(want) {
		t.Fatalf("row of %s: %d files, %d bytes, updated %v, versions %v; the listing: %d, %d, %v, %v", model, r.Files, r.Bytes, r.Updated, got, n, size, latest, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("row of %s: version %s = %+v, the listing %+v", model, k, got[k], w)
		}
	}
}

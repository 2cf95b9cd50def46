package treesync_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/datastore/lifecycle"
	"github.com/lakemeta/lake/treesync"
)

// TestCatalogAndLifecycle: each sync folds its namespace's changes into the
// catalog and reads only the catalog's changes; a model whose definition is
// deleted is orphaned; a plan deletes nothing; the lifecycle, once enabled,
// drops the orphaned model whole (files, partition, catalog row) and old
// versions beyond keep-last, and never a live model or data without a
// definition; every tree of the namespace removes the dropped model's files.
func TestCatalogAndLifecycle(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		ctx := t.Context()
		a := newTree(t, s, &treesync.Options{Namespace: "alpha"})
		a2 := newTree(t, s, &treesync.Options{Namespace: "alpha"})
		b := newTree(t, s, &treesync.Options{Namespace: "beta"})
		for _, m := range []string{"keep", "gone"} {
			write(t, a, "data/m/"+m+"/model.yaml", "type: m\n")
			write(t, a, "data/m/"+m+"/out/1/raw", m+" v1")
		}
		write(t, a, "data/m/nodef/out/1/raw", "written without a definition")
		if rep := sync(t, a, treesync.Scope{}); rep.CatalogFolded != 3 {
			t.Fatalf("first sync folded %d rows, want 3", rep.CatalogFolded)
		}
		rep := sync(t, b, treesync.Scope{})
		if rep.CatalogRead != 3 {
			t.Fatalf("beta's first sync read %d catalog rows, want alpha's 3", rep.CatalogRead)
		}
		mirror, err := b.Catalog()
		if err != nil {
			t.Fatal(err)
		}
		states := map[string]string{}
		for k, r := range mirror {
			states[k] = r.State
		}
		if states["alpha/m/keep"] != catalog.Live || states["alpha/m/gone"] != catalog.Live || states["alpha/m/nodef"] != catalog.Undefined || len(states) != 3 {
			t.Fatalf("beta's catalog mirror = %v", states)
		}
		if r := mirror["alpha/m/keep"]; r.Files != 2 || len(r.Entries) != 1 || r.Entries[0].Name != "out" || r.Bytes != int64(len("type: m\n")+len("keep v1")) {
			t.Fatalf("row of alpha/m/keep = %+v", r)
		}
		if rep := sync(t, b, treesync.Scope{}); rep.CatalogRead != 0 {
			t.Fatalf("a sync with nothing changed read %d catalog rows, want 0", rep.CatalogRead)
		}
		sync(t, a2, treesync.Scope{})
		wantFile(t, a2, "data/m/gone/out/1/raw", "gone v1")

		// Model delete: the definition goes, the data stays, orphaned.
		if err := os.Remove(filepath.Join(a.Dir(), "data/m/gone/model.yaml")); err != nil {
			t.Fatal(err)
		}
		sync(t, a, treesync.Scope{})
		alpha, err := s.Namespace("alpha")
		if err != nil {
			t.Fatal(err)
		}
		if r, ok, err := catalog.Get(ctx, s, "alpha", "m/gone"); err != nil || !ok || r.State != catalog.Orphaned || r.Deleted.IsZero() {
			t.Fatalf("row of the deleted model = %+v, %v, %v; want orphaned", r, ok, err)
		}
		// A plan changes nothing.
		actions, _, err := lifecycle.PlanNamespace(ctx, alpha, &datastore.Lifecycle{}, alpha.Now())
		if err != nil || len(actions) != 1 || actions[0].Kind != lifecycle.DropModel || actions[0].Model != "m/gone" {
			t.Fatalf("plan = %v, %v; want the drop of m/gone only", actions, err)
		}
		wantRemote(t, alpha, "data/m/gone/out/1/raw", "gone v1")
		sync(t, a2, treesync.Scope{})
		wantFile(t, a2, "data/m/gone/out/1/raw", "gone v1")

		// Lifecycle on: the next sync in the namespace drops it whole.
		write(t, a2, "data/m/keep/out/2/raw", "keep v2")
		write(t, a2, "data/m/keep/out/3/raw", "keep v3")
		if _, err := alpha.SetLifecycle(ctx, datastore.Lifecycle{Enabled: true, KeepLast: 2}); err != nil {
			t.Fatal(err)
		}
		rep = sync(t, a2, treesync.Scope{})
		if rep.PrunedModels != 1 || rep.PrunedVersions != 1 {
			t.Fatalf("lifecycle sync pruned %d models and %d versions, want 1 and 1 (report %+v)", rep.PrunedModels, rep.PrunedVersions, rep)
		}
		wantRemote(t, alpha, "data/m/gone/out/1/raw", "")
		wantRemote(t, alpha, "data/m/keep/out/1/raw", "")
		wantRemote(t, alpha, "data/m/keep/out/2/raw", "keep v2")
		wantRemote(t, alpha, "data/m/keep/out/3/raw", "keep v3")
		wantRemote(t, alpha, "data/m/keep/model.yaml", "type: m\n")
		wantRemote(t, alpha, "data/m/nodef/out/1/raw", "written without a definition")
		if parts, err := alpha.Partitions(ctx); err != nil || slices.Contains(parts, "m/gone") {
			t.Fatalf("partitions after the prune = %v, %v; the dropped model is still registered", parts, err)
		}
		if _, ok, _ := catalog.Get(ctx, s, "alpha", "m/gone"); ok {
			t.Fatal("the dropped model is still in the catalog")
		}
		if _, ok := read(t, a2, "data/m/gone/out/1/raw"); ok {
			t.Fatal("the tree that pruned kept the dropped model's file")
		}
		if _, err := os.Stat(filepath.Join(a2.Dir(), "data/m/gone")); !os.IsNotExist(err) {
			t.Fatalf("the dropped model's directory is still in the tree: %v", err)
		}
		// The other trees learn it from the catalog.
		sync(t, a, treesync.Scope{})
		if _, ok := read(t, a, "data/m/gone/out/1/raw"); ok {
			t.Fatal("another tree of the namespace kept the dropped model's file")
		}
		wantFile(t, a, "data/m/keep/out/3/raw", "keep v3")
		if _, ok := read(t, a, "data/m/keep/out/1/raw"); ok {
			t.Fatal("the version beyond keep-last is still in another tree")
		}
		sync(t, b, treesync.Scope{})
		mirror, _ = b.Catalog()
		var keys []string
		for k := range mirror {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if strings.Join(keys, ",") != "alpha/m/keep,alpha/m/nodef" {
			t.Fatalf("beta's catalog after the prune = %v", keys)
		}
		// Beta's own index never held alpha's files.
		if files, err := s.ListAll(ctx, "data/"); err != nil || len(files) != 0 {
			t.Fatalf("the default namespace lists %d files, want none", len(files))
		}
	})
}

// TestPrunedVersionsFoldedInTheirSync: a sync that commits nothing but
// whose lifecycle deletes versions folds their rows in the same sync
// (its second fold reads past the lifecycle's deletes): the catalog row
// names only the versions kept, read right after the sync. The first fold
// may take the pull's read (catalog.FoldOptions.Pulled); the second may
// not, since the lifecycle wrote after the pull.
func TestPrunedVersionsFoldedInTheirSync(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *datastore.Store) {
		ctx := t.Context()
		a := newTree(t, s, &treesync.Options{Namespace: "pv"})
		write(t, a, "data/m/keep/model.yaml", "type: m\n")
		for i := 1; i <= 3; i++ {
			write(t, a, fmt.Sprintf("data/m/keep/out/%d/raw", i), fmt.Sprintf("v%d", i))
		}
		sync(t, a, treesync.Scope{})
		sync(t, a, treesync.Scope{})
		ns, err := s.Namespace("pv")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ns.SetLifecycle(ctx, datastore.Lifecycle{Enabled: true, KeepLast: 2}); err != nil {
			t.Fatal(err)
		}
		rep := sync(t, a, treesync.Scope{})
		if rep.Committed != 0 || rep.PrunedVersions != 1 {
			t.Fatalf("the lifecycle's sync committed %d and pruned %d versions; want 0 and 1", rep.Committed, rep.PrunedVersions)
		}
		r, ok, err := catalog.Get(ctx, s, "pv", "m/keep")
		if err != nil || !ok || len(r.Entries) != 1 || len(r.Entries[0].Versions) != 2 || r.Files != 3 {
			t.Fatalf("the row right after the sync: %+v, %v, %v; want 3 files, out's 2 versions kept", r, ok, err)
		}
	})
}

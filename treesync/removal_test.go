package treesync_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/treesync"
)

// TestLifecycleRemovalIsNotReadBack (issue 31): a sync whose lifecycle
// drops a model removes its catalog row, and the tree's catalog cursor
// moves past that removal as it moves past its fold's rows (the store
// proving nothing else moved it): the next sync reads no catalog change
// back and, with nothing else changed, takes no lock. Another tree of the
// namespace still learns of the removal from the catalog.
func TestLifecycleRemovalIsNotReadBack(t *testing.T) {
	body := func(t *testing.T, s *datastore.Store) {
		ctx := t.Context()
		a := newTree(t, s, &treesync.Options{Namespace: "lr"})
		other := newTree(t, s, &treesync.Options{Namespace: "lr"})
		ns, err := s.Namespace("lr")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ns.SetLifecycle(ctx, datastore.Lifecycle{Enabled: true}); err != nil {
			t.Fatal(err)
		}
		write(t, a, "data/m/gone/model.yaml", "type: m\n")
		write(t, a, "data/m/gone/out/1/raw", "v1")
		write(t, a, "data/m/keep/model.yaml", "type: m\n")
		sync(t, a, treesync.Scope{})
		sync(t, other, treesync.Scope{})
		if err := os.Remove(filepath.Join(a.Dir(), "data/m/gone/model.yaml")); err != nil {
			t.Fatal(err)
		}
		if rep := sync(t, a, treesync.Scope{}); rep.PrunedModels != 1 {
			t.Fatalf("the sync of the deleted definition pruned %d models, want 1", rep.PrunedModels)
		}
		if _, ok, err := catalog.Get(ctx, s, "lr", "m/gone"); err != nil || ok {
			t.Fatalf("the dropped model's row: %v, %v; want none", ok, err)
		}
		rep := sync(t, a, treesync.Scope{})
		if rep.CatalogRead != 0 || !rep.Unlocked {
			t.Fatalf("the sync after the prune read %d catalog changes, unlocked %v; want 0, true", rep.CatalogRead, rep.Unlocked)
		}
		sync(t, other, treesync.Scope{})
		mirror, err := other.Catalog()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := mirror["lr/m/gone"]; ok || len(mirror) != 1 {
			t.Fatalf("the other tree's mirror after the prune: %v; want lr/m/keep only", mirror)
		}
	}
	eachBackend(t, body)
	t.Run("s3", func(t *testing.T) {
		d, err := s3fs.Open(t.Context(), s3local.Client(t), s3fs.Options{Bucket: s3local.Bucket(t), Prefix: "lr"})
		if err != nil {
			t.Fatal(err)
		}
		s := datastore.New(d)
		t.Cleanup(func() { s.Close() })
		body(t, s)
	})
}

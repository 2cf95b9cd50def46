package treesync_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/treesync"
)

// TestLifecycleRemovalIsNotReadBack (issue 31): a sync whose lifecycle
// drops a model removes its catalog row right after its fold wrote the
// row's last state, and the tree's catalog cursor moves past both, as
// past the fold's rows alone (the store proving nothing else moved it:
// the second move starts from the cursor the first returned). The next
// sync reads no catalog change back and, with nothing else changed, takes
// no lock, counted on the wire: one BatchGetItem on DynamoDB; on S3 the
// two changed-partition LISTs (the namespace's record known from its
// listing, models-v4: docs/s3.md), and the head of
// data, whose claims the drop changed (not a commit: read back; a head of
// claims only, its log not listed). A catalog cursor left before the
// removal would cost a head GET and a log LIST more on S3. Another tree of the namespace still learns of the
// removal from the catalog.
func TestLifecycleRemovalIsNotReadBack(t *testing.T) {
	// sent counts the requests the store was sent; want is how many the
	// sync after the prune sends (0: not counted, bolt).
	body := func(t *testing.T, s *datastore.Store, sent func() int, want int) {
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
		if rep := sync(t, a, treesync.Scope{}); rep.PrunedModels != 1 || rep.CatalogFolded != 1 {
			t.Fatalf("the sync of the deleted definition pruned %d models, folded %d rows; want 1, 1", rep.PrunedModels, rep.CatalogFolded)
		}
		if _, ok, err := catalog.Get(ctx, s, "lr", "m/gone"); err != nil || ok {
			t.Fatalf("the dropped model's row: %v, %v; want none", ok, err)
		}
		before := sent()
		rep := sync(t, a, treesync.Scope{})
		if rep.CatalogRead != 0 || !rep.Unlocked {
			t.Fatalf("the sync after the prune read %d catalog changes, unlocked %v; want 0, true", rep.CatalogRead, rep.Unlocked)
		}
		if n := sent() - before; want > 0 && n != want {
			t.Fatalf("the sync after the prune sent %d requests, want %d", n, want)
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
	t.Run("bolt", func(t *testing.T) { body(t, boltStore(t), func() int { return 0 }, 0) })
	t.Run("dynamodb", func(t *testing.T) {
		s, sent := countingDynamoStore(t)
		body(t, s, func() int {
			n := 0
			for _, c := range sent() {
				n += c
			}
			return n
		}, 1)
	})
	t.Run("s3", func(t *testing.T) {
		s, d := newS3Store(t, "lr")
		body(t, s, func() int {
			c := d.Requests()
			return int(c.Get + c.Put + c.Head + c.Delete + c.List)
		}, 3)
	})
}

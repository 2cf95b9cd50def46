package treesync_test

import (
	"context"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/treesync"
)

// TestRunReadsRowsWithItsStat (issue 31): a Run's function leaves its
// dirty paths behind it, after the read-ahead made before it ran; the stat
// of those paths then reads their models' catalog rows in the same request
// (DynamoDB: one BatchGetItem for what was a TransactGetItems of the stat
// and one of the fold's row), and the fold brings the row forward from
// them. Counted on the wire by a client wrapper, rows checked against a
// listing of the model; on every backend the rows come out the same.
func TestRunReadsRowsWithItsStat(t *testing.T) {
	ctx := t.Context()
	counting, sent := countingDynamoStore(t)
	s3store, _ := newS3Store(t, "rr")
	stores := map[string]*datastore.Store{"dynamodb": counting, "bolt": boltStore(t), "s3": s3store}
	for name, s := range stores {
		t.Run(name, func(t *testing.T) {
			tr := newTree(t, s, &treesync.Options{Namespace: "rr"})
			ns, err := s.Namespace("rr")
			if err != nil {
				t.Fatal(err)
			}
			run := func(files map[string]string) treesync.Report {
				t.Helper()
				rep, err := tr.Run(ctx, treesync.Scope{}, func(context.Context, *lock.Lease) error {
					for p, c := range files {
						write(t, tr, p, c)
					}
					return nil
				}, treesync.RunOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return rep
			}
			run(map[string]string{"data/m/x/model.yaml": "type: m\n", "data/m/x/out/1/raw": "v1"})
			wantListedRow(t, ns, "m/x")

			before := sent()
			rep := run(map[string]string{"data/m/x/out/1/raw": "version one, longer", "data/m/x/out/2/raw": "v2"})
			if rep.Committed != 2 || rep.CatalogFolded != 1 || rep.CatalogForwarded != 1 {
				t.Fatalf("the run committed %d, folded %d rows, %d brought forward; want 2, 1, 1", rep.Committed, rep.CatalogFolded, rep.CatalogForwarded)
			}
			after := sent()
			for op, n := range before {
				after[op] -= n
			}
			wantListedRow(t, ns, "m/x")
			// The commit's snapshot read, which carries the catalog
			// commit's (dynamofs/prefetch.go; 2 TransactGetItems before
			// it, 4 before the stat and the row came with the
			// BatchGetItem after the function ran).
			if name == "dynamodb" && (after["TransactGetItems"] != 1 || after["GetItem"] != 0) {
				t.Fatalf("the run's sync sent %v; want 1 TransactGetItems and no GetItem", after)
			}
		})
	}
}

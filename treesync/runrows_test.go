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
// of those paths then reads their models' catalog rows and what the sync's
// commit and its fold's commit read, in the same request (DynamoDB: one
// TransactGetItems for what was a BatchGetItem of the stat and the row,
// and before that a TransactGetItems of the stat and one of the fold's
// row, besides the commits' reads), and the fold brings the row forward
// from them. Counted on the wire by a client wrapper, rows checked against
// a listing of the model; on every backend the rows come out the same.
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
			// One BatchGetItem, the read-ahead before the function ran;
			// one TransactGetItems after it, the stat's, which carries
			// the row and both commits' reads (dynamofs/prefetch.go).
			if name == "dynamodb" && (after["BatchGetItem"] != 1 || after["TransactGetItems"] != 1 || after["GetItem"] != 0) {
				t.Fatalf("the run's sync sent %v; want 1 BatchGetItem, 1 TransactGetItems and no GetItem", after)
			}
		})
	}
}

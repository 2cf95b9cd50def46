package treesync_test

import (
	"context"
	"maps"
	stdsync "sync"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultapi"
	"github.com/lakemeta/lake/internal/s3local"
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
	var mu stdsync.Mutex
	ops := map[string]int{}
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
	counted := faultapi.New(ddb.NewClient(ddblocal.Config(t), ""), func(op, _ string) faultapi.Fault {
		mu.Lock()
		ops[op]++
		mu.Unlock()
		return faultapi.None
	})
	d, err := dynamofs.Open(ctx, counted, dynamofs.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	counting := datastore.New(d)
	t.Cleanup(func() { counting.Close() })

	sd, err := s3fs.Open(ctx, s3local.Client(t), s3fs.Options{Bucket: s3local.Bucket(t), Prefix: "rr"})
	if err != nil {
		t.Fatal(err)
	}
	s3store := datastore.New(sd)
	t.Cleanup(func() { s3store.Close() })
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

			mu.Lock()
			clear(ops)
			mu.Unlock()
			rep := run(map[string]string{"data/m/x/out/1/raw": "version one, longer", "data/m/x/out/2/raw": "v2"})
			if rep.Committed != 2 || rep.CatalogFolded != 1 || rep.CatalogForwarded != 1 {
				t.Fatalf("the run committed %d, folded %d rows, %d brought forward; want 2, 1, 1", rep.Committed, rep.CatalogFolded, rep.CatalogForwarded)
			}
			mu.Lock()
			sent := maps.Clone(ops)
			mu.Unlock()
			wantListedRow(t, ns, "m/x")
			// The commit's snapshot read and the catalog commit's: the
			// stat and the row came with the BatchGetItem after the
			// function ran (4 TransactGetItems before).
			if name == "dynamodb" && (sent["TransactGetItems"] != 2 || sent["GetItem"] != 0) {
				t.Fatalf("the run's sync sent %v; want 2 TransactGetItems and no GetItem", sent)
			}
		})
	}
}

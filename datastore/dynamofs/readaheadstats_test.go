package dynamofs_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultapi"
)

// TestReadAheadStatsOfTwoStores (issue 31): ReadAheadStats reads the
// stat of paths of a namespace and of the catalog store in the one
// BatchGetItem of the read-ahead; each StatMany with its context takes its
// part without a request, once; a change another process makes after it is
// seen by the next StatMany.
func TestReadAheadStatsOfTwoStores(t *testing.T) {
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
	var reqs atomic.Int32
	faulty := faultapi.New(ddb.NewClient(ddblocal.Config(t), ""), func(op, _ string) faultapi.Fault {
		reqs.Add(1)
		return faultapi.None
	})
	ctx := t.Context()
	open := func(api ddb.API) (*datastore.Store, *datastore.Store, *datastore.Store) {
		d, err := dynamofs.Open(ctx, api, dynamofs.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		root, err := datastore.Open(ctx, d, nil)
		if err != nil {
			t.Fatal(err)
		}
		ns, err := root.Namespace("ns")
		if err != nil {
			t.Fatal(err)
		}
		cat, err := root.CatalogStore()
		if err != nil {
			t.Fatal(err)
		}
		return root, ns, cat
	}
	_, ns, cat := open(faulty)
	_, other, otherCat := open(ddb.NewClient(ddblocal.Config(t), ""))
	if _, err := other.Put(ctx, "data/m/1/a", strings.NewReader("a"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := otherCat.Put(ctx, "ns/m/1", strings.NewReader(""), []byte("row")); err != nil {
		t.Fatal(err)
	}
	reqs.Store(0)
	actx, ok, err := ns.ReadAheadStats(ctx, nil, nil, map[*datastore.Store][]string{
		ns: {"data/m/1/a"}, cat: {"ns/m/1", "ns/m/2"}})
	if err != nil || !ok || reqs.Load() != 1 {
		t.Fatalf("ReadAheadStats: %v, %v, %d requests; want one", ok, err, reqs.Load())
	}
	if _, err := otherCat.Put(ctx, "ns/m/2", strings.NewReader(""), []byte("row 2")); err != nil {
		t.Fatal(err)
	}
	reqs.Store(0)
	got, err := cat.StatMany(actx, []string{"ns/m/1", "ns/m/2"})
	if err != nil || string(got["ns/m/1"].Meta) != "row" || len(got) != 1 || reqs.Load() != 0 {
		t.Fatalf("the catalog's StatMany from the read-ahead = %v, %v, %d requests; want ns/m/1 alone, no request", got, err, reqs.Load())
	}
	if got, err := ns.StatMany(actx, []string{"data/m/1/a"}); err != nil || got["data/m/1/a"].Size != 1 || reqs.Load() != 0 {
		t.Fatalf("the namespace's StatMany from the read-ahead = %v, %v, %d requests; want the file, no request", got, err, reqs.Load())
	}
	// Served once: the next read sees the row written since.
	if got, err := cat.StatMany(actx, []string{"ns/m/1", "ns/m/2"}); err != nil || len(got) != 2 || reqs.Load() == 0 {
		t.Fatalf("the catalog's StatMany again = %v, %v, %d requests; want both rows, read", got, err, reqs.Load())
	}
}

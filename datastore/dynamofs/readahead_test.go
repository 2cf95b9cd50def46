package dynamofs_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultapi"
	"github.com/lakemeta/lake/metastore"
)

// TestReadAheadIsASnapshotServedOnce (issue 31): ReadAhead reads a
// namespace's and the catalog's shard counters, the namespace's record and
// a file's item in one BatchGetItem; the calls made with its context take their part
// without a request, once. What changes after it (another process's
// commit, a hostile peer deleting the record with the raw SDK) is not seen
// by those calls, as it would not have been by calls made at that instant,
// and is seen by the next call with the same context and by any other.
func TestReadAheadIsASnapshotServedOnce(t *testing.T) {
	raw := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, raw, dynamofs.TableInput(table))
	var reqs atomic.Int32
	faulty := faultapi.New(ddb.NewClient(ddblocal.Config(t), ""), func(op, _ string) faultapi.Fault {
		reqs.Add(1)
		return faultapi.None
	})
	ctx := t.Context()
	root, ns := rootAndNamespace(t, faulty, table, "ns")
	_, other := rootAndNamespace(t, ddb.NewClient(ddblocal.Config(t), ""), table, "ns")
	if _, err := ns.SetLifecycle(ctx, datastore.Lifecycle{Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Put(ctx, "data/m/1/a", strings.NewReader("a"), nil); err != nil {
		t.Fatal(err)
	}
	_, cursor, err := ns.ChangedPartitions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := root.CatalogStore()
	if err != nil {
		t.Fatal(err)
	}
	reqs.Store(0)
	before, err := ns.Stat(ctx, "data/m/1/a")
	if err != nil {
		t.Fatal(err)
	}
	reqs.Store(0)
	actx, err := ns.ReadAhead(ctx, []*datastore.Store{ns, cat}, []string{ns.ConfigRecord()}, []string{"data/m/1/a"})
	if err != nil || reqs.Load() != 1 {
		t.Fatalf("ReadAhead: %v, %d requests; want one", err, reqs.Load())
	}
	// Another process commits, and a hostile peer deletes the record.
	if _, err := other.Put(ctx, "data/m/2/b", strings.NewReader("b"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Put(ctx, "data/m/1/a", strings.NewReader("a2"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "k#datastore/namespaces"}, "sk": &types.AttributeValueMemberS{Value: ns.ConfigRecord()}}}); err != nil {
		t.Fatal(err)
	}
	reqs.Store(0)
	heads, _, err := ns.ChangedPartitions(actx, cursor)
	if err != nil || len(heads) != 0 || reqs.Load() != 0 {
		t.Fatalf("ChangedPartitions from the read-ahead = %v, %v, %d requests; want the snapshot (nothing changed), no request", heads, err, reqs.Load())
	}
	if _, _, err := cat.ChangedPartitions(actx, ""); err != nil || reqs.Load() != 0 {
		t.Fatalf("the catalog's ChangedPartitions from the read-ahead: %v, %d requests; want none", err, reqs.Load())
	}
	if c, err := ns.Config(actx); err != nil || !c.Lifecycle.Enabled || reqs.Load() != 0 {
		t.Fatalf("Config from the read-ahead = %+v, %v, %d requests; want the snapshot's policy, no request", c, err, reqs.Load())
	}
	if got, err := ns.StatMany(actx, []string{"data/m/1/a"}); err != nil || got["data/m/1/a"].Version != before.Version || reqs.Load() != 0 {
		t.Fatalf("StatMany from the read-ahead = %v, %v, %d requests; want the snapshot's version, no request", got, err, reqs.Load())
	}
	if got, err := ns.StatMany(actx, []string{"data/m/1/a"}); err != nil || got["data/m/1/a"].Version == before.Version {
		t.Fatalf("StatMany again with the read-ahead's context = %v, %v; want the new version", got, err)
	}
	// Served once: the same context now reads afresh, as does any other.
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"the read-ahead's context again", actx}, {"a plain context", ctx}} {
		heads, _, err := ns.ChangedPartitions(c.ctx, cursor)
		if err != nil || len(heads) != 2 {
			t.Fatalf("ChangedPartitions with %s = %v, %v; want m/1 and m/2", c.name, heads, err)
		}
		if cfg, err := ns.Config(c.ctx); err != nil || cfg.Lifecycle.Enabled {
			t.Fatalf("Config with %s and the record deleted = %+v, %v; want the zero policy", c.name, cfg, err)
		}
	}
	if _, err := root.Records().GetRecord(actx, ns.ConfigRecord()); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("the deleted record reads %v; want not found", err)
	}
}

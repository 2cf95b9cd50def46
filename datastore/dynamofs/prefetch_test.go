package dynamofs_test

import (
	"context"
	"fmt"
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
)

// prefetchPair is a datastore with two namespaces, "ns" (where the first
// commit goes) and "cat" (the later commit's, as the catalog's), through
// a client whose TransactGetItems are counted and which runs a hook
// (once) before the second TransactWriteItems: between the first commit
// and the later one.
type prefetchPair struct {
	raw     *dynamodb.Client
	table   string
	d       *dynamofs.Driver
	ns, cat *datastore.Store
	other   *datastore.Store // cat, through another client: another process
	reads   atomic.Int32
	writes  atomic.Int32
	between atomic.Pointer[func()]
}

func newPrefetchPair(t *testing.T) *prefetchPair {
	t.Helper()
	f := &prefetchPair{raw: ddblocal.Client(t), table: ddblocal.TableName(t)}
	ddblocal.CreateTable(t, f.raw, dynamofs.TableInput(f.table))
	api := faultapi.New(ddb.NewClient(ddblocal.Config(t), ""), func(op, _ string) faultapi.Fault {
		switch op {
		case "TransactGetItems":
			f.reads.Add(1)
		case "TransactWriteItems":
			if f.writes.Add(1) == 2 {
				if h := f.between.Swap(nil); h != nil {
					(*h)()
				}
			}
		}
		return faultapi.None
	})
	var err error
	if f.d, err = dynamofs.Open(t.Context(), api, dynamofs.Options{Table: f.table}); err != nil {
		t.Fatal(err)
	}
	root := datastore.New(f.d)
	t.Cleanup(func() { root.Close() })
	if f.ns, err = root.Namespace("ns"); err != nil {
		t.Fatal(err)
	}
	if f.cat, err = root.Namespace("cat"); err != nil {
		t.Fatal(err)
	}
	_, f.other = rootAndNamespace(t, ddb.NewClient(ddblocal.Config(t), ""), f.table, "cat")
	return f
}

// commitBoth commits a file in ns, then (with the same context, which
// asked the first commit to prefetch row) row in cat, and returns the
// TransactGetItems both sent and the commits built on a prefetch.
func (f *prefetchPair) commitBoth(t *testing.T, file, row string, between func()) (int32, int64) {
	t.Helper()
	ctx := f.cat.PrefetchCommit(t.Context(), []string{row})
	if between != nil {
		f.between.Store(&between)
	}
	f.reads.Store(0)
	f.writes.Store(0)
	before := f.d.Stats()
	commitFile(ctx, t, f.ns, file, "data")
	commitFile(ctx, t, f.cat, row, "row of "+file)
	return f.reads.Load(), f.d.Stats().Sub(before).CommitsPrefetched
}

// commitFile uploads content to path in s and commits it, with ctx.
func commitFile(ctx context.Context, t *testing.T, s *datastore.Store, path, content string) {
	t.Helper()
	st, err := s.Upload(ctx, path, strings.NewReader(content), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, nil, []datastore.Entry{{Put: &st}}); err != nil {
		t.Fatalf("commit of %s: %v", path, err)
	}
}

// wantRow wants path's content in cat, read by another process.
func (f *prefetchPair) wantRow(t *testing.T, path, content string) {
	t.Helper()
	_, b, err := f.other.Get(t.Context(), path)
	if err != nil || string(b) != content {
		t.Fatalf("%s = %q, %v; want %q", path, b, err, content)
	}
}

// putRawRow puts row's item in cat with a raw SDK client, as a writer
// that is not lake would (not Fatal: it may run inside the client's hook).
func (f *prefetchPair) putRawRow(t *testing.T, row string) {
	t.Helper()
	_, err := f.raw.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &f.table, Item: map[string]types.AttributeValue{
		"pk":  &types.AttributeValueMemberS{Value: "s#cat#f#ns"},
		"sk":  &types.AttributeValueMemberS{Value: row},
		"pos": &types.AttributeValueMemberN{Value: "99"},
		"ver": &types.AttributeValueMemberS{Value: "foreign"},
	}})
	if err != nil {
		t.Errorf("raw PutItem: %v", err)
	}
}

// TestFoldReadsWithTheCommitBefore (issue 31, prefetch.go): a commit in
// one namespace made with a context that names a later commit's paths in
// another reads that commit's keys in its own TransactGetItems, and the
// later commit builds on that read: one TransactGetItems for both, and the
// later commit lands as if it had read. A later commit of a path not
// named reads for itself; so does one whose keys would not fit the first
// commit's read.
func TestFoldReadsWithTheCommitBefore(t *testing.T) {
	f := newPrefetchPair(t)
	if reads, pre := f.commitBoth(t, "data/t/m0/a", "ns/t/m0", nil); reads != 1 || pre != 1 {
		t.Errorf("a commit and the row it prefetched: %d TransactGetItems, %d built on the prefetch; want 1 and 1", reads, pre)
	}
	f.wantRow(t, "ns/t/m0", "row of data/t/m0/a")
	if reads, pre := f.commitBoth(t, "data/t/m0/b", "ns/t/m0", nil); reads != 1 || pre != 1 {
		t.Errorf("over an existing row: %d TransactGetItems, %d built on the prefetch; want 1 and 1", reads, pre)
	}
	f.wantRow(t, "ns/t/m0", "row of data/t/m0/b")

	// The later commit writes another path than the one named.
	ctx := f.cat.PrefetchCommit(t.Context(), []string{"ns/t/m9"})
	before := f.d.Stats()
	commitFile(ctx, t, f.ns, "data/t/m1/a", "x")
	commitFile(ctx, t, f.cat, "ns/t/m1", "x")
	if n := f.d.Stats().Sub(before).CommitsPrefetched; n != 0 {
		t.Errorf("a later commit of a path not named built on the prefetch (%d)", n)
	}
	f.wantRow(t, "ns/t/m1", "x")

	// More keys than one TransactGetItems reads: no prefetch.
	var rows []string
	for i := range 120 {
		rows = append(rows, fmt.Sprintf("ns/t/x%03d", i))
	}
	ctx = f.cat.PrefetchCommit(t.Context(), rows)
	before = f.d.Stats()
	commitFile(ctx, t, f.ns, "data/t/m2/a", "x")
	commitFile(ctx, t, f.cat, rows[0], "x")
	if n := f.d.Stats().Sub(before).CommitsPrefetched; n != 0 {
		t.Errorf("a prefetch too big for the first commit's read was used (%d)", n)
	}
}

// TestPrefetchedReadGoneStale: what the later commit builds on was read
// before the first commit's write; a writer that changes it in between
// (another process's commit in the later commit's partition; a raw SDK
// client, lake did not write, putting the very row) makes the later
// commit's write fail its conditions, and it reads again and lands over
// what that writer wrote: nothing of either is lost, nothing committed on
// the stale read.
func TestPrefetchedReadGoneStale(t *testing.T) {
	f := newPrefetchPair(t)
	ctx := context.Background()
	reads, pre := f.commitBoth(t, "data/t/m0/a", "ns/t/m0", func() {
		st, err := f.other.Upload(ctx, "ns/t/m5", strings.NewReader("another row"), nil)
		if err == nil {
			_, err = f.other.Commit(ctx, nil, []datastore.Entry{{Put: &st}})
		}
		if err != nil {
			t.Errorf("another process's commit: %v", err) // not Fatal: this runs inside the client's hook
		}
	})
	if pre != 1 || reads != 2 {
		t.Errorf("a commit in the partition between: %d built on the prefetch, %d TransactGetItems; want 1 and 2 (the read again)", pre, reads)
	}
	f.wantRow(t, "ns/t/m0", "row of data/t/m0/a")
	f.wantRow(t, "ns/t/m5", "another row")
	changes, _, err := f.other.Changes(ctx, "ns", 0, 100)
	if err != nil || len(changes) != 2 || changes[0].Pos == changes[1].Pos {
		t.Fatalf("the partition's feed: %v, %v; want both rows at their own positions", changes, err)
	}

	// A raw client puts the row itself between: the later commit's
	// absence condition fails, it reads the foreign item and puts over it.
	reads, pre = f.commitBoth(t, "data/t/m0/b", "ns/t/m7", func() { f.putRawRow(t, "ns/t/m7") })
	if pre != 1 || reads != 2 {
		t.Errorf("a raw put of the row between: %d built on the prefetch, %d TransactGetItems; want 1 and 2", pre, reads)
	}
	f.wantRow(t, "ns/t/m7", "row of data/t/m0/b")
}

// TestRowRemovalReadsWithTheDrop: the lifecycle's drop of a model, made
// with a context that names the model's catalog row, reads the row's keys
// with its own read of the heads (one TransactGetItems), and the row's
// removal builds on it: no read of its own.
func TestRowRemovalReadsWithTheDrop(t *testing.T) {
	f := newPrefetchPair(t)
	f.commitBoth(t, "data/t/m0/a", "ns/t/m0", nil)
	ctx := f.cat.PrefetchCommit(t.Context(), []string{"ns/t/m0"})
	f.reads.Store(0)
	before := f.d.Stats()
	if _, dropped, err := f.ns.DropPartitionIfDeleted(ctx, nil, "t/m0", "data/t/m0/model.yaml"); err != nil || !dropped {
		t.Fatalf("drop: %v, %v", dropped, err)
	}
	if _, err := f.cat.Commit(ctx, nil, []datastore.Entry{{Delete: "ns/t/m0"}}); err != nil {
		t.Fatal(err)
	}
	if reads, pre := f.reads.Load(), f.d.Stats().Sub(before).CommitsPrefetched; reads != 1 || pre != 1 {
		t.Errorf("a drop and its row's removal: %d TransactGetItems, %d built on the prefetch; want 1 and 1", reads, pre)
	}
	if _, _, err := f.other.Get(t.Context(), "ns/t/m0"); err == nil {
		t.Fatal("the row is still there")
	}
}

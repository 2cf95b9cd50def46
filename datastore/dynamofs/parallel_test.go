package dynamofs

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/inflight"
)

// holdingAPI holds each call of the operations it has a gauge for in that
// gauge; DynamoDB Local still answers every request.
type holdingAPI struct {
	ddb.API
	mu     sync.Mutex
	gauges map[string]*inflight.Gauge
}

func (a *holdingAPI) enter(op string) func() {
	a.mu.Lock()
	g := a.gauges[op]
	a.mu.Unlock()
	if g == nil {
		return func() {}
	}
	return g.Enter()
}

func (a *holdingAPI) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	defer a.enter("BatchGetItem")()
	return a.API.BatchGetItem(ctx, in, o...)
}

func (a *holdingAPI) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	defer a.enter("Query")()
	return a.API.Query(ctx, in, o...)
}

func (a *holdingAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	defer a.enter("TransactWriteItems")()
	return a.API.TransactWriteItems(ctx, in, o...)
}

// hold starts holding op's calls and returns their gauge.
func (a *holdingAPI) hold(op string) *inflight.Gauge {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := inflight.New(30 * time.Millisecond)
	a.gauges[op] = g
	return g
}

// holdingStore opens a datastore on a fresh table through a holdingAPI
// that holds nothing yet.
func holdingStore(t *testing.T) (*Driver, *datastore.Store, *holdingAPI, string) {
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, ddblocal.Client(t), TableInput(table))
	api := &holdingAPI{API: ddb.NewClient(ddblocal.Config(t), ""), gauges: map[string]*inflight.Gauge{}}
	d, err := Open(t.Context(), api, Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	return d, s, api, table
}

// TestPagesAndSettlingInParallel (issue 31): a read of more keys than one
// BatchGetItem takes sends its pages at once, and a staged commit's
// settling transactions (each its own files) go at once, at most 8 in
// flight; what is read and committed is the sequential outcome, and the
// commit's entry lists, record and live-set id go in one transaction.
func TestPagesAndSettlingInParallel(t *testing.T) {
	d, s, api, table := holdingStore(t)
	ctx := t.Context()
	const files = 300
	var es []datastore.Entry
	var paths []string
	for i := range files {
		p := fmt.Sprintf("data/t/m/f%03d", i)
		st, err := s.Upload(ctx, p, strings.NewReader(fmt.Sprint("content ", i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		es, paths = append(es, datastore.Entry{Put: &st}), append(paths, p)
	}
	writes := api.hold("TransactWriteItems")
	before := d.Stats()
	if _, err := s.Commit(ctx, nil, es); err != nil {
		t.Fatal(err)
	}
	// Nothing of the commit is left, and its entry lists, its record and
	// its live-set id went in one transaction (no BatchWriteItem).
	if n := d.Stats().Sub(before).Requests["BatchWriteItem"]; n != 0 {
		t.Fatalf("the commit sent %d BatchWriteItem", n)
	}
	out, err := ddblocal.Client(t).Scan(ctx, &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range out.Items {
		pk, sk := getS(it, attrPK), getS(it, attrSK)
		if strings.HasPrefix(pk, "o#") && pk != "o#" || sk == "live" && it["ids"] != nil {
			t.Fatalf("left after the commit settled: %s %s %v", pk, sk, it)
		}
	}
	if n := writes.Most(); n < 2 || n > settleParallel {
		t.Fatalf("a staged commit of %d files had at most %d transactions in flight; want 2 to %d", files, n, settleParallel)
	}
	reads := api.hold("BatchGetItem")
	keys := make([]item, files)
	for i, p := range paths {
		keys[i] = key(d.filePK(d.partition(p)), p)
	}
	got, err := d.batchGet(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if n := reads.Most(); n < 2 || n > batchGetParallel {
		t.Fatalf("a read of %d keys had at most %d pages in flight; want 2 to %d", files, n, batchGetParallel)
	}
	seen := map[string]bool{}
	for _, it := range got {
		seen[getS(it, attrSK)] = true
		if getS(it, attrTx) != "" {
			t.Fatalf("%s still staged after its commit settled", getS(it, attrSK))
		}
	}
	for _, p := range paths {
		if !seen[p] {
			t.Fatalf("%s not read (%d of %d items)", p, len(got), files)
		}
	}
	for i, p := range paths[:20] {
		if _, b, err := s.Get(ctx, p); err != nil || string(b) != fmt.Sprint("content ", i) {
			t.Fatalf("%s = %q, %v", p, b, err)
		}
	}
}

// TestChangesOfHeadsReadsFeedsAtOnce (issue 31): a reader of many changed
// partitions (the catalog's reader, one partition a namespace) reads their
// feeds at once, at most 8 in flight, and gets what reading them one by
// one gives.
func TestChangesOfHeadsReadsFeedsAtOnce(t *testing.T) {
	d, s, api, _ := holdingStore(t)
	WithoutFeedsByKeys(d) // the Queries are what this measures (recentpaths.go reads by keys)
	ctx := t.Context()
	const parts = 12
	for i := range parts {
		for j := range 3 {
			if _, err := s.Put(ctx, fmt.Sprintf("data/t/m%02d/f%d", i, j), strings.NewReader(fmt.Sprint(i, j)), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	heads, _, err := s.ChangedPartitions(ctx, "")
	if err != nil || len(heads) != parts {
		t.Fatalf("ChangedPartitions: %d heads, %v; want %d", len(heads), err, parts)
	}
	after := map[string]uint64{heads[0].Partition: 1} // one read from a position, the rest whole
	queries := api.hold("Query")
	got, err := s.ChangesOfHeads(ctx, heads, after, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if n := queries.Most(); n < 2 || n > 8 {
		t.Fatalf("%d feeds read with at most %d at once; want 2 to 8", parts, n)
	}
	api.mu.Lock()
	delete(api.gauges, "Query")
	api.mu.Unlock()
	for _, h := range heads {
		want, upTo, err := s.Changes(ctx, h.Partition, after[h.Partition], 1000)
		if err != nil {
			t.Fatal(err)
		}
		hc := got[h.Partition]
		if hc.Horizon || hc.UpTo != upTo || len(hc.Changes) != len(want) {
			t.Fatalf("%s: %+v; want %d changes up to %d", h.Partition, hc, len(want), upTo)
		}
		for i := range want {
			if hc.Changes[i].Path != want[i].Path || hc.Changes[i].Pos != want[i].Pos {
				t.Fatalf("%s: change %d is %s at %d, want %s at %d", h.Partition, i, hc.Changes[i].Path, hc.Changes[i].Pos, want[i].Path, want[i].Pos)
			}
		}
	}
}

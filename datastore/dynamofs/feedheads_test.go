package dynamofs_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dstest"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// queryHook runs before each Query of the feed index (bypos) and each
// BatchGetItem of file items (a read of feeds by the paths their heads
// name, recentpaths.go).
type queryHook struct {
	ddb.API
	before atomic.Pointer[func()]
}

func (q *queryHook) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if f := q.before.Load(); f != nil && in.IndexName != nil && *in.IndexName == "bypos" {
		(*f)()
	}
	return q.API.Query(ctx, in, o...)
}

func (q *queryHook) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if f := q.before.Load(); f != nil {
		for _, ka := range in.RequestItems {
			if pk, ok := ka.Keys[0]["pk"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, "f#") {
				(*f)()
				break
			}
		}
	}
	return q.API.BatchGetItem(ctx, in, o...)
}

// feedReads are the two ways ChangesOfHeads reads the feeds on DynamoDB:
// by a Query each, and by the paths the heads name (recentpaths.go).
var feedReads = []struct {
	name   string
	byKeys bool
}{{"by Query", false}, {"by keys", true}}

func hookedStore(t *testing.T, byKeys bool) (*datastore.Store, *dynamofs.Driver, *queryHook) {
	t.Helper()
	hook := &queryHook{API: ddb.NewClient(ddblocal.Config(t), "")}
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
	d, err := dynamofs.Open(t.Context(), hook, dynamofs.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if !byKeys {
		dynamofs.WithoutFeedsByKeys(d)
	}
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	return s, d, hook
}

// TestChangesOfHeads (issue 31): the feeds of several changed partitions
// read up to the heads ChangedPartitions returned are what Changes
// returns for each, at one Query a partition and one BatchGetItem for all
// their floors (Changes: a GetItem and a Query a partition); a partition
// not past its position is left out.
func TestChangesOfHeads(t *testing.T) {
	for _, fr := range feedReads {
		t.Run(fr.name, func(t *testing.T) { testChangesOfHeads(t, fr.byKeys) })
	}
}

func testChangesOfHeads(t *testing.T, byKeys bool) {
	ctx := t.Context()
	s, d, _ := hookedStore(t, byKeys)
	for i, p := range []string{"data/m/1/a", "data/m/2/a", "data/m/3/a", "data/m/1/b", "data/m/2/a", "data/m/3/c"} {
		if _, err := s.Put(ctx, p, strings.NewReader(strings.Repeat("x", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Delete(ctx, "data/m/3/a"); err != nil {
		t.Fatal(err)
	}
	heads, _, err := s.ChangedPartitions(ctx, "")
	if err != nil || len(heads) != 3 {
		t.Fatalf("ChangedPartitions = %v, %v", heads, err)
	}
	after := map[string]uint64{"m/1": 1, "m/3": 3}
	for _, h := range heads {
		if h.Partition == "m/3" {
			after["m/3"] = h.Seq // not past it
		}
	}
	before := d.Stats()
	got, err := s.ChangesOfHeads(ctx, heads, after, 1000)
	if err != nil {
		t.Fatal(err)
	}
	cost := d.Stats().Sub(before)
	if _, ok := got["m/3"]; ok || len(got) != 2 {
		t.Fatalf("ChangesOfHeads = %v; want m/1 and m/2 only", got)
	}
	switch {
	case !byKeys && (cost.Requests["Query"] != 2 || cost.Requests["BatchGetItem"] != 1 || cost.Requests["GetItem"] != 0):
		t.Fatalf("ChangesOfHeads cost %v; want 2 Query and 1 BatchGetItem", cost.Requests)
	case byKeys && (cost.Requests["Query"] != 0 || cost.Requests["BatchGetItem"] != 1 || cost.Requests["GetItem"] != 0 || cost.FeedsByKeys != 2):
		t.Fatalf("ChangesOfHeads cost %v, %d feeds by keys; want 1 BatchGetItem (the items, no floors: they prove the feeds whole) and both feeds", cost.Requests, cost.FeedsByKeys)
	}
	for p, hc := range got {
		want, upTo, err := s.Changes(ctx, p, after[p], 1000)
		if err != nil {
			t.Fatal(err)
		}
		if hc.Horizon || hc.UpTo != upTo || len(hc.Changes) != len(want) {
			t.Fatalf("%s: %+v; Changes gives %v up to %d", p, hc, want, upTo)
		}
		for i := range want {
			if hc.Changes[i].Path != want[i].Path || hc.Changes[i].Pos != want[i].Pos || hc.Changes[i].Deleted != want[i].Deleted {
				t.Fatalf("%s: change %d is %+v; Changes gives %+v", p, i, hc.Changes[i], want[i])
			}
		}
	}
}

// TestChangesOfHeadsPurgeMeanwhile: a tombstone purged (the floor raised
// past the reader's position in the same write) after ChangedPartitions
// read the heads and before the feed was read is missing from the feed
// read; the floors read after the feeds say so, and the partition is
// reported past the horizon instead of read as if nothing had been
// deleted.
func TestChangesOfHeadsPurgeMeanwhile(t *testing.T) {
	for _, fr := range feedReads {
		t.Run(fr.name, func(t *testing.T) { testChangesOfHeadsPurgeMeanwhile(t, fr.byKeys) })
	}
}

func testChangesOfHeadsPurgeMeanwhile(t *testing.T, byKeys bool) {
	ctx := t.Context()
	s, d, hook := hookedStore(t, byKeys)
	for _, p := range []string{"data/m/1/a", "data/m/1/b"} {
		if _, err := s.Put(ctx, p, strings.NewReader(p), nil); err != nil {
			t.Fatal(err)
		}
	}
	heads, cursor, err := s.ChangedPartitions(ctx, "")
	if err != nil || len(heads) != 1 {
		t.Fatalf("ChangedPartitions = %v, %v", heads, err)
	}
	after := map[string]uint64{"m/1": heads[0].Seq}
	if _, err := s.Delete(ctx, "data/m/1/a"); err != nil {
		t.Fatal(err)
	}
	heads, _, err = s.ChangedPartitions(ctx, cursor)
	if err != nil || len(heads) != 1 || heads[0].Floor > after["m/1"] {
		t.Fatalf("ChangedPartitions = %v, %v", heads, err)
	}
	purge := func() {
		hook.before.Store(nil)
		st, err := d.Reclaim(ctx, time.Now().Add(time.Hour), datastore.ReclaimOptions{Horizon: time.Nanosecond})
		if err != nil || st.Tombstones == 0 {
			t.Errorf("reclaim: %+v, %v; want the tombstone purged", st, err)
		}
	}
	hook.before.Store(&purge)
	got, err := s.ChangesOfHeads(ctx, heads, after, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if hc := got["m/1"]; !hc.Horizon || len(hc.Changes) != 0 {
		t.Fatalf("after a purge between the heads and the feed: %+v; want the horizon", hc)
	}
	if _, _, err := s.Changes(ctx, "m/1", after["m/1"], 1000); err == nil {
		t.Fatal("Changes below the raised floor: no error")
	}
}

// TestChangesOfHeadsDroppedMeanwhile: a partition dropped after
// ChangedPartitions named it and before its feed was read has no head when
// the floors are read: it is reported to be read whole (its files are
// gone), not as a feed read whole up to a head that no longer exists.
func TestChangesOfHeadsDroppedMeanwhile(t *testing.T) {
	for _, fr := range feedReads {
		t.Run(fr.name, func(t *testing.T) { testChangesOfHeadsDroppedMeanwhile(t, fr.byKeys) })
	}
}

func testChangesOfHeadsDroppedMeanwhile(t *testing.T, byKeys bool) {
	ctx := t.Context()
	s, _, hook := hookedStore(t, byKeys)
	for _, p := range []string{"data/m/1/a", "data/m/2/a"} {
		if _, err := s.Put(ctx, p, strings.NewReader(p), nil); err != nil {
			t.Fatal(err)
		}
	}
	heads, _, err := s.ChangedPartitions(ctx, "")
	if err != nil || len(heads) != 2 {
		t.Fatalf("ChangedPartitions = %v, %v", heads, err)
	}
	drop := func() {
		hook.before.Store(nil)
		if _, err := s.DropPartition(ctx, nil, "m/1"); err != nil {
			t.Errorf("drop: %v", err)
		}
	}
	hook.before.Store(&drop)
	got, err := s.ChangesOfHeads(ctx, heads, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if hc := got["m/1"]; !hc.Horizon {
		t.Fatalf("the dropped partition: %+v; want it read whole", hc)
	}
	if hc := got["m/2"]; hc.Horizon || len(hc.Changes) != 1 {
		t.Fatalf("the other partition: %+v; want its one change", hc)
	}
}

// TestChangesOfHeadsMissesNothing: dstest.RunFeedFollower on DynamoDB
// (writers, a compactor purging every tombstone, a reader that falls
// behind, whose view ends equal to the store's), reading the feeds by
// Query and by the paths the heads name.
func TestChangesOfHeadsMissesNothing(t *testing.T) {
	for _, fr := range feedReads {
		t.Run(fr.name, func(t *testing.T) {
			s, d, _ := hookedStore(t, fr.byKeys)
			before := d.Stats()
			dstest.RunFeedFollower(t, s, func(ctx context.Context) (int, error) {
				// An hour ahead: every tombstone is past the horizon.
				st, err := d.Reclaim(ctx, time.Now().Add(time.Hour), datastore.ReclaimOptions{Horizon: time.Nanosecond, Grace: time.Nanosecond})
				return st.Tombstones, err
			})
			if st := d.Stats().Sub(before); fr.byKeys != (st.FeedsByKeys > 0) {
				t.Errorf("%d feeds read by keys", st.FeedsByKeys)
			}
		})
	}
}

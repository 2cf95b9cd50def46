package s3fs_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/inflight"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/metastore"
)

// heldReadsAPI holds each GetObject and ListObjectsV2 in its gauge.
type heldReadsAPI struct {
	s3fs.API
	gauge *inflight.Gauge
}

func (a *heldReadsAPI) GetObject(ctx context.Context, in *s3.GetObjectInput, o ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	defer a.gauge.Enter()()
	return a.API.GetObject(ctx, in, o...)
}

func (a *heldReadsAPI) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, o ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	defer a.gauge.Enter()()
	return a.API.ListObjectsV2(ctx, in, o...)
}

func sent(d *s3fs.Driver) int64 {
	c := d.Requests()
	return c.Get + c.Put + c.Head + c.Delete + c.List
}

// TestReadAheadSendsAtOnce (issue 31): S3's read-ahead sends a sync's
// reads (the scopes' head listings, the records, the Stat of the dirty
// paths) at once, and each call made with its context takes its answer
// once, with no request: the answer it would have had at the read-ahead.
// A second call, a Stat of other paths, and a driver of another bucket
// handed the same context read afresh; a commit another writer lands
// after the read-ahead is not in the served answers, and the served feed
// cursor does not skip it.
func TestReadAheadSendsAtOnce(t *testing.T) {
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	api := &heldReadsAPI{API: c, gauge: inflight.New(30 * time.Millisecond)}
	d, root := openStore(t, api, bucket, "ra")
	ctx := t.Context()
	ns, err := root.Namespace("ns")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Put(ctx, "data/m/1/a", strings.NewReader("one"), nil); err != nil {
		t.Fatal(err)
	}
	if err := root.Records().CASRecord(ctx, "rec/ns/cfg", metastore.ExpectAbsent(), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	_, cursor0, err := ns.ChangedPartitions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"data/m/1/a", "data/m/1/b"}
	api.gauge.Reset()
	actx, err := ns.ReadAhead(ctx, []*datastore.Store{ns, root}, []string{"rec/ns/cfg", "rec/ns/none"}, paths)
	if err != nil {
		t.Fatal(err)
	}
	most := api.gauge.Most()
	if most < 4 {
		t.Fatalf("the read-ahead had at most %d reads in flight; want its 4 listings and records at once", most)
	}
	// Another writer commits after the read-ahead.
	_, other := openStore(t, c, bucket, "ra")
	ons, _ := other.Namespace("ns")
	if _, err := ons.Put(ctx, "data/m/1/a", strings.NewReader("two"), nil); err != nil {
		t.Fatal(err)
	}
	before := sent(d)
	heads, cursor, err := ns.ChangedPartitions(actx, cursor0)
	if err != nil || len(heads) != 0 {
		t.Fatalf("served ChangedPartitions = %+v, %v; want none moved (as at the read-ahead)", heads, err)
	}
	v, err := root.Records().GetRecord(actx, "rec/ns/cfg")
	if err != nil || string(v) != "v1" {
		t.Fatalf("served record = %q, %v", v, err)
	}
	if _, err := root.Records().GetRecord(actx, "rec/ns/none"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("served absent record: %v, want ErrNotFound", err)
	}
	st, err := ns.StatMany(actx, paths)
	if err != nil || st["data/m/1/a"].Pos != 1 || len(st) != 1 {
		t.Fatalf("served Stat = %+v, %v; want a at 1 only", st, err)
	}
	if n := sent(d) - before; n != 0 {
		t.Fatalf("the calls served by the read-ahead sent %d requests", n)
	}
	// Served once: the same calls again read afresh, and see the commit.
	st, err = ns.StatMany(actx, paths)
	if err != nil || st["data/m/1/a"].Pos != 2 {
		t.Fatalf("Stat again = %+v, %v; want a at 2", st, err)
	}
	heads, _, err = ns.ChangedPartitions(actx, cursor)
	if err != nil || len(heads) != 1 || heads[0].Seq != 2 {
		t.Fatalf("ChangedPartitions from the served cursor = %+v, %v; want m/1 at 2", heads, err)
	}
	if sent(d) == before {
		t.Fatal("the second calls sent nothing")
	}
	// Another bucket's driver handed the context reads its own.
	c2, bucket2 := s3local.Client(t), s3local.Bucket(t)
	_, s2 := openStore(t, c2, bucket2, "ra")
	actx, err = root.ReadAhead(ctx, nil, []string{"rec/ns/cfg"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Records().GetRecord(actx, "rec/ns/cfg"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("another bucket's record read through the context: %v, want ErrNotFound", err)
	}
	if v, err := root.Records().GetRecord(actx, "rec/ns/cfg"); err != nil || !reflect.DeepEqual(v, []byte("v1")) {
		t.Fatalf("record = %q, %v", v, err)
	}
}

// TestReadAheadStatsOfTwoNamespaces: the stats of two namespaces (a sync's
// dirty paths and its models' catalog rows) are read ahead at once with
// the rest, and each namespace's StatMany of those paths is served once.
func TestReadAheadStatsOfTwoNamespaces(t *testing.T) {
	api := &heldReadsAPI{API: s3local.Client(t), gauge: inflight.New(30 * time.Millisecond)}
	d, root := openStore(t, api, s3local.Bucket(t), "ras")
	ctx := t.Context()
	a, _ := root.Namespace("a")
	b, _ := root.Namespace("b")
	for _, s := range []*datastore.Store{a, b} {
		if _, err := s.Put(ctx, "data/m/1/x", strings.NewReader(s.NamespaceName()), nil); err != nil {
			t.Fatal(err)
		}
	}
	actx, ok, err := a.ReadAheadStats(ctx, []*datastore.Store{a}, nil, map[*datastore.Store][]string{a: {"data/m/1/x"}, b: {"data/m/1/x", "data/m/2/y"}})
	if err != nil || !ok {
		t.Fatalf("ReadAheadStats: %v, %v", ok, err)
	}
	before := sent(d)
	for _, s := range []*datastore.Store{a, b} {
		got, err := s.StatMany(actx, []string{"data/m/1/x", "data/m/2/y"}[:map[string]int{"a": 1, "b": 2}[s.NamespaceName()]])
		if err != nil || got["data/m/1/x"].Pos != 1 {
			t.Fatalf("%s: served Stat = %+v, %v", s.NamespaceName(), got, err)
		}
	}
	if n := sent(d) - before; n != 0 {
		t.Fatalf("the stats served by the read-ahead sent %d requests", n)
	}
	if _, err := b.StatMany(actx, []string{"data/m/1/x"}); err != nil || sent(d) == before {
		t.Fatalf("a Stat of other paths was served from the read-ahead (%v)", err)
	}
}

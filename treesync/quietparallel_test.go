package treesync_test

import (
	"context"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/inflight"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/treesync"
)

// readsAPI holds each GetObject and ListObjectsV2 in its gauge and counts
// the listings by prefix.
type readsAPI struct {
	s3fs.API
	gauge *inflight.Gauge
	mu    stdsync.Mutex
	lists map[string]int
	gets  int
}

// takeGets returns the GETs since the last takeGets.
func (a *readsAPI) takeGets() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.gets
	a.gets = 0
	return n
}

func (a *readsAPI) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	a.mu.Lock()
	a.gets++
	a.mu.Unlock()
	defer a.gauge.Enter()()
	return a.API.GetObject(ctx, in, opts...)
}

func (a *readsAPI) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	a.mu.Lock()
	a.lists[aws.ToString(in.Prefix)]++
	a.mu.Unlock()
	defer a.gauge.Enter()()
	return a.API.ListObjectsV2(ctx, in, opts...)
}

// take returns the most reads in flight at once and the listings by
// prefix since the last take.
func (a *readsAPI) take() (int, map[string]int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	most, lists := a.gauge.Most(), a.lists
	a.gauge.Reset()
	a.lists = map[string]int{}
	return most, lists
}

// TestQuietReadsAtOnce (issue 31): a sync with nothing to push sends its
// reads (the namespace's changed partitions, the catalog's changes) at
// once, and takes the namespace's configuration from the namespace's
// listing without a GET (a models-v4 datastore keeps it beside the
// namespace's heads: docs/s3.md); with nothing changed it ends there,
// unlocked. When another tree committed meanwhile it goes on under the
// lock without listing the catalog's heads again (quiet's read is used),
// and pulls the other tree's file.
func TestQuietReadsAtOnce(t *testing.T) {
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	open := func(api s3fs.API) *datastore.Store {
		s, _ := openS3Store(t, api, bucket, "quiet")
		return s
	}
	api := &readsAPI{API: c, gauge: inflight.New(30 * time.Millisecond), lists: map[string]int{}}
	o := func() *treesync.Options {
		return &treesync.Options{Namespace: "ns", Catalog: treesync.CatalogIncremental}
	}
	tr := newTree(t, open(api), o())
	other := newTree(t, open(c), o())
	write(t, other, "data/t/m/a", "from the other tree")
	sync(t, other, treesync.Scope{})
	sync(t, tr, treesync.Scope{})
	sync(t, tr, treesync.Scope{}) // the policy is now remembered: quiet can run
	api.take()
	api.takeGets()
	if rep := sync(t, tr, treesync.Scope{}); !rep.Unlocked {
		t.Fatalf("nothing changed, yet the sync locked: %+v", rep)
	}
	if gets := api.takeGets(); gets != 0 {
		t.Fatalf("a sync with nothing changed sent %d GETs; want none (its namespace's record known from the listing)", gets)
	}
	if most, _ := api.take(); most < 2 {
		t.Fatalf("a sync with nothing changed had at most %d reads in flight; want its 2 at once", most)
	}
	write(t, other, "data/t/m/b", "more")
	sync(t, other, treesync.Scope{})
	api.take()
	if rep := sync(t, tr, treesync.Scope{}); rep.Unlocked {
		t.Fatalf("another tree committed, yet the sync ended unlocked: %+v", rep)
	}
	_, lists := api.take()
	for prefix, n := range lists {
		if strings.Contains(prefix, "_catalog") && strings.HasSuffix(prefix, "/h/") && n != 1 {
			t.Errorf("the catalog's heads were listed %d times (%s); want once, quiet's read used", n, prefix)
		}
	}
	wantFile(t, tr, "data/t/m/b", "more")
}

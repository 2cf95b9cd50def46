package lifecycle

import (
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
)

// TestCatalogReclaimClaimedOncePerPeriod: trees that call Reclaim at once
// reclaim the shared catalog once between them (one CAS wins); none does
// again within the period, and one does once it has passed.
func TestCatalogReclaimClaimedOncePerPeriod(t *testing.T) {
	d, err := boltfs.Open(filepath.Join(t.TempDir(), "lake.db"), &boltfs.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const every = 5 * time.Second
	var won atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			ok, err := claimCatalogReclaim(ctx, s.Root(), now, every)
			if err != nil {
				t.Error(err)
			}
			if ok {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	if n := won.Load(); n != 1 {
		t.Fatalf("%d of 32 concurrent callers claimed the catalog's reclaim; want 1", n)
	}
	if ok, err := claimCatalogReclaim(ctx, s.Root(), now.Add(every-time.Millisecond), every); err != nil || ok {
		t.Fatalf("a claim within the period = %v, %v; want refused", ok, err)
	}
	if ok, err := claimCatalogReclaim(ctx, s.Root(), now.Add(every), every); err != nil || !ok {
		t.Fatalf("a claim once the period passed = %v, %v; want granted", ok, err)
	}
	// A record from a clock that ran far ahead does not stop reclaims.
	if ok, err := claimCatalogReclaim(ctx, s.Root(), now.Add(-time.Hour), every); err != nil || !ok {
		t.Fatalf("a claim after a far-future record = %v, %v; want granted", ok, err)
	}
}

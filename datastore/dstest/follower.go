package dstest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// RunFeedFollower: writers put and delete files of three partitions of s
// while a compactor purges tombstones (purge: a Reclaim that makes every
// tombstone due, returning how many it purged) and a reader that falls
// behind now and then follows with ChangedPartitions and ChangesOfHeads,
// reading a partition whole when it is told to: once the writers stop,
// the reader's view is every live file with its version, and no deleted
// one. (The purge landing exactly between a head's read and its feed's,
// where a read is proven whole or not, is each driver's own tests; here
// the reader is mostly told by the floor it read.)
func RunFeedFollower(t *testing.T, s *datastore.Store, purge func(context.Context) (int, error)) {
	ctx := t.Context()
	parts := []string{"m/1", "m/2", "m/3"}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 3 {
		wg.Go(func() {
			for i := range 30 {
				time.Sleep(40 * time.Millisecond)
				p := fmt.Sprintf("data/%s/f%d", parts[(w+i)%3], i%4)
				if i%3 == 2 {
					if _, err := s.Delete(ctx, p); err != nil && !errors.Is(err, metastore.ErrNotFound) {
						t.Errorf("delete %s: %v", p, err)
					}
					continue
				}
				if _, err := s.Put(ctx, p, strings.NewReader(fmt.Sprintf("%d-%d", w, i)), nil); err != nil {
					t.Errorf("put %s: %v", p, err)
				}
			}
		})
	}
	var purged, horizons, follows atomic.Int64
	compacted := make(chan struct{})
	go func() {
		defer close(compacted)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			n, err := purge(ctx)
			if err != nil {
				t.Errorf("reclaim: %v", err)
			}
			purged.Add(int64(n))
		}
	}()
	view := map[string]string{} // path -> version
	pos := map[string]uint64{}
	cur := ""
	readWhole := func(p string) {
		for k := range view {
			if datastore.Partition(k) == p {
				delete(view, k)
			}
		}
		for _, in := range listAll(t, s, "data/"+p+"/") {
			view[in.Path] = in.Version
		}
	}
	follow := func() {
		follows.Add(1)
		heads, next, err := s.ChangedPartitions(ctx, cur)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.ChangesOfHeads(ctx, heads, pos, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range heads {
			hc, ok := got[h.Partition]
			switch {
			case !ok:
			case hc.Horizon:
				horizons.Add(1)
				readWhole(h.Partition)
				pos[h.Partition] = h.Seq
			default:
				for _, c := range hc.Changes {
					if c.Deleted {
						delete(view, c.Path)
					} else {
						view[c.Path] = c.Version
					}
				}
				pos[h.Partition] = hc.UpTo
				if hc.UpTo < h.Seq {
					next = cur // a page short of the head: read on from here
				}
			}
		}
		cur = next
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			follow()
			// A reader that falls behind now and then, so that purges
			// land between its reads.
			time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
		}
	}
	close(stop)
	<-compacted
	follow()
	follow()
	want := map[string]string{}
	for _, in := range listAll(t, s, "data/") {
		want[in.Path] = in.Version
	}
	t.Logf("%d reads, %d partitions read whole, %d tombstones purged", follows.Load(), horizons.Load(), purged.Load())
	if purged.Load() == 0 {
		t.Fatal("the compactor purged no tombstone: the test did not race a purge")
	}
	if fmt.Sprint(view) != fmt.Sprint(want) {
		t.Fatalf("the reader's view\n%v\nthe store's\n%v", view, want)
	}
}

// listAll lists every file under prefix, page after page (a page may end
// at a partition's end).
func listAll(t *testing.T, s *datastore.Store, prefix string) []datastore.Info {
	t.Helper()
	var out []datastore.Info
	for cursor := ""; ; {
		pg, err := s.List(t.Context(), prefix, 1000, cursor)
		if err != nil {
			t.Fatalf("list %s: %v", prefix, err)
		}
		out = append(out, pg.Files...)
		if cursor = pg.Cursor; cursor == "" {
			return out
		}
	}
}

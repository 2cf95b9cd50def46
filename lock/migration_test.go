package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/migrate"
)

// TestLocksAcrossMigration holds locks and writes through them on a
// DynamoDB table while it migrates from v1 to v2 (dual, backfill, verify,
// finalize with its write pause): exclusion holds, every accepted fenced
// increment is counted once, and tokens keep growing across the layouts.
func TestLocksAcrossMigration(t *testing.T) {
	api, opts := newDynamoTables(t, dynamostore.LayoutAuto)
	open := func() (*metastore.Store, *dynamostore.Driver) {
		o := opts
		o.Refresh = 50 * time.Millisecond
		d, err := dynamostore.Open(context.Background(), api, o)
		if err != nil {
			t.Fatal(err)
		}
		s := metastore.New(d)
		t.Cleanup(func() { s.Close() })
		return s, d
	}
	ctx := context.Background()
	stop := make(chan struct{})
	var inside atomic.Int32
	var accepted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	var counter *metastore.Store
	for w := range 4 {
		s, _ := open()
		counter = s
		l := newLocker(t, Metastore(s), Options{Lease: 5 * time.Second, Wait: time.Minute, Holder: fmt.Sprint("w", w)})
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last Token
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := l.WithLock(ctx, "ns/migrating", func(ctx context.Context, ls *Lease) error {
					if ls.Token() <= last {
						return fmt.Errorf("token %d after %d", ls.Token(), last)
					}
					last = ls.Token()
					if !inside.CompareAndSwap(0, 1) {
						return errors.New("two holders at once")
					}
					defer inside.Store(0)
					err := fencedIncrement(ctx, s, ls, "count/migrating")
					if err == nil {
						accepted.Add(1)
					} else if errors.Is(err, metastore.ErrWritesPaused) || errors.Is(err, metastore.ErrUnavailable) {
						return nil // refused for now (finalize's pause): not counted, retried next turn
					}
					return err
				})
				if err != nil && !errors.Is(err, metastore.ErrWritesPaused) && !errors.Is(err, metastore.ErrUnavailable) {
					errs <- err
					return
				}
			}
		}()
	}
	_, md := open()
	m, err := migrate.New(md, &migrate.Options{Refresh: 50 * time.Millisecond, PageSize: 50, GateWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"dual", "backfill", "verify", "finalize"} {
		time.Sleep(300 * time.Millisecond)
		if err := m.Run(ctx, step); err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("step %s: %v", step, err)
		}
	}
	// Some increments after finalize too, and at least 20 in all: on a
	// loaded machine the steps alone may leave the holders few turns.
	time.Sleep(500 * time.Millisecond)
	for deadline := time.Now().Add(20 * time.Second); accepted.Load() < 20 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	v, err := counter.Get(ctx, "count/migrating")
	if err != nil || string(v) != strconv.FormatInt(accepted.Load(), 10) {
		t.Fatalf("counter = %q, %v; %d increments accepted", v, err, accepted.Load())
	}
	if accepted.Load() < 20 {
		t.Fatalf("only %d increments: the workload proved nothing", accepted.Load())
	}
	t.Logf("%d fenced increments across v1 → dual → backfill → v2-authoritative", accepted.Load())
}

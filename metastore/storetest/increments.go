package storetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/lakemeta/lake/metastore"
)

// Increments has workers goroutines each make attempts Get-then-CAS
// increments of the decimal counter under key, and returns how many CAS
// calls reported success. A conflict is a lost race, not an error; any other
// error stops the run. A correct store ends with the counter equal to the
// returned count: no success lost, no failure applied.
func Increments(ctx context.Context, s *metastore.Store, key string, workers, attempts int) (int64, error) {
	wins, _, err := increments(ctx, s, key, workers, attempts, false)
	return wins, err
}

// IncrementsUnderFaults is Increments for a store whose backend faults: a
// CAS that ends with ErrUnavailable (its outcome unknown: it applied once or
// not at all) is counted in unknown and the run goes on. A correct store ends
// with the counter between wins and wins+unknown.
func IncrementsUnderFaults(ctx context.Context, s *metastore.Store, key string, workers, attempts int) (wins, unknown int64, err error) {
	return increments(ctx, s, key, workers, attempts, true)
}

// increments drives both: with tolerateUnknown, an ErrUnavailable CAS is
// counted as unknown instead of stopping the run.
func increments(ctx context.Context, s *metastore.Store, key string, workers, attempts int, tolerateUnknown bool) (int64, int64, error) {
	var w, u atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range attempts {
				cur, err := s.Get(ctx, key)
				if err != nil {
					errs <- err
					return
				}
				n, err := strconv.Atoi(string(cur))
				if err != nil {
					errs <- fmt.Errorf("counter %q holds %q", key, cur)
					return
				}
				err = s.CAS(ctx, key, metastore.ExpectValue(cur), []byte(strconv.Itoa(n+1)))
				switch {
				case err == nil:
					w.Add(1)
				case tolerateUnknown && errors.Is(err, metastore.ErrUnavailable):
					u.Add(1)
				case !errors.Is(err, metastore.ErrConflict):
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return w.Load(), u.Load(), <-errs
}

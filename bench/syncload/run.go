package syncload

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/lakemeta/lake/datastore"
)

// RunWorkers runs the workers ids of cfg concurrently over the shared
// driver d, each in its own directory under a fresh temporary root, until
// each has run cfg.Iterations, cfg.Duration has passed since start, or ctx
// ends. emit receives every sample, one call at a time. It returns the
// first error that is not an iteration's own (those are in the samples).
func RunWorkers(ctx context.Context, cfg Config, d datastore.Driver, ids []int, start time.Time, emit func(Sample)) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	root, err := os.MkdirTemp("", "lake-bench-sync-")
	if err != nil {
		return fmt.Errorf("lake: %w", err)
	}
	defer os.RemoveAll(root)
	workers := make([]*worker, len(ids))
	for i, id := range ids {
		if workers[i], err = newWorker(id, cfg, d, root, start); err != nil {
			return err
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := 1; cfg.Iterations == 0 || it <= cfg.Iterations; it++ {
				if ctx.Err() != nil || (cfg.Duration > 0 && time.Since(start) >= cfg.Duration) {
					return
				}
				s := w.iterate(ctx, it)
				if ctx.Err() != nil {
					return // cut short by the caller: not a measurement
				}
				mu.Lock()
				emit(s)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// Run runs every worker of cfg in this process and returns the samples,
// after calling progress (if not nil) with each.
func Run(ctx context.Context, cfg Config, d datastore.Driver, progress func(Sample)) ([]Sample, error) {
	ids := make([]int, cfg.Workers)
	for i := range ids {
		ids[i] = i
	}
	var out []Sample
	err := RunWorkers(ctx, cfg, d, ids, time.Now(), func(s Sample) {
		out = append(out, s)
		if progress != nil {
			progress(s)
		}
	})
	return out, err
}

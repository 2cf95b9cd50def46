package syncload

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// FullIndex is the seed's one-partition index of every file, kept beside
// the datastore when the store has one (DynamoDB: a table whose GSI
// partition "FILE" holds an item per file): every commit records its
// paths; a full pull reads the partition whole.
type FullIndex interface {
	Record(ctx context.Context, paths []string, at time.Time) error
	Pull(ctx context.Context, watermark time.Time, filtered bool) (itemsRead int64, changes int, err error)
}

// Env is what a run works on: the shared datastore driver, and the seed's
// full index when the store has one (nil: a full pull reads the listing).
type Env struct {
	Driver    datastore.Driver
	FullIndex FullIndex
	// Layout is the datastore's layout (datastore.Store.Layout of the
	// Store that opened Driver): every worker's Store computes partitions
	// with it.
	Layout datastore.Layout
}

// RunWorkers runs the workers ids of cfg concurrently over the shared
// driver of env, each in its own directory under a fresh temporary root, until
// each has run cfg.Iterations, cfg.Duration has passed since start, or ctx
// ends. emit receives every sample, one call at a time. It returns the
// first error that is not an iteration's own (those are in the samples).
func RunWorkers(ctx context.Context, cfg Config, env Env, ids []int, start time.Time, emit func(Sample)) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Pull == PullFullFilter && env.FullIndex == nil {
		return fmt.Errorf("%w: pull %s needs the seed's index, which only DynamoDB has", metastore.ErrInvalidArgument, cfg.Pull)
	}
	root, err := os.MkdirTemp("", "lake-bench-sync-")
	if err != nil {
		return fmt.Errorf("lake: %w", err)
	}
	defer os.RemoveAll(root)
	workers := make([]*worker, len(ids))
	for i, id := range ids {
		if workers[i], err = newWorker(id, cfg, env, root, start); err != nil {
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
func Run(ctx context.Context, cfg Config, env Env, progress func(Sample)) ([]Sample, error) {
	ids := make([]int, cfg.Workers)
	for i := range ids {
		ids[i] = i
	}
	var out []Sample
	err := RunWorkers(ctx, cfg, env, ids, time.Now(), func(s Sample) {
		out = append(out, s)
		if progress != nil {
			progress(s)
		}
	})
	return out, err
}

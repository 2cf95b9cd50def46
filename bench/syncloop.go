package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/treesync"
)

// Cost is a backend's cumulative request and item counters.
type Cost struct {
	Requests, ItemsRead, ItemsWritten int64
}

// SyncLoopOptions shape SyncLoop.
type SyncLoopOptions struct {
	// Workers run the loop at once, each in its own directory (default 10).
	Workers int
	// Namespaces: 1 puts every worker in one namespace (one lock, one
	// index); otherwise each worker has a namespace of its own (default:
	// Workers).
	Namespaces int
	// Iterations of the seed's loop per worker (default 100).
	Iterations int
	// Files each iteration's method run writes into its fresh model
	// (default 5, plus the model's definition: the seed's six).
	Files int
	// Lifecycle enables each namespace's lifecycle (retention 0, a horizon
	// of one minute), so the deleted models are pruned by the syncs.
	Lifecycle bool
	// Horizon is the lifecycle's tombstone horizon (default 20s): the
	// catalog's feed holds the tombstones of the pruned models' rows for
	// that long.
	Horizon time.Duration
	// Reports is how many rows are printed over the run (default 10).
	Reports int
	// Cost, when set, returns the backend's counters so far (DynamoDB).
	Cost func() Cost
}

// SyncLoop runs seed 004's loop with Workers workers at once: iteration i of
// worker w creates the disposable model bench/wW-iI (its definition and
// Files data files) with `lake data run`'s sequence (lock, pull, work,
// push, commit, release), then deletes the model's definition and syncs.
// With Lifecycle the namespaces expire the deleted models on their own. At
// Reports points of the run it stops the workers between iterations and
// prints: the iterations done, the syncs per second, the share of syncs
// whose lock acquisition found the lock held by another worker, the lock
// wait per sync (mean and max), the index entries a sync committed and the
// feed entries its pull read, what a sync cost (requests and items read and written,
// on DynamoDB), and the size of every structure lake keeps for the
// datastore: catalog rows and entries (tombstones included), registered
// partitions, feed entries (live files and tombstones), and live files.
func SyncLoop(ctx context.Context, w io.Writer, s *datastore.Store, o SyncLoopOptions) error {
	if o.Workers <= 0 {
		o.Workers = 10
	}
	if o.Namespaces <= 0 || o.Namespaces > o.Workers {
		o.Namespaces = o.Workers
	}
	if o.Iterations <= 0 {
		o.Iterations = 100
	}
	if o.Files <= 0 {
		o.Files = 5
	}
	if o.Reports <= 0 {
		o.Reports = 10
	}
	if o.Horizon <= 0 {
		o.Horizon = 20 * time.Second
	}
	root, err := os.MkdirTemp("", "lake-syncloop-")
	if err != nil {
		return fmt.Errorf("lake: %w", err)
	}
	defer os.RemoveAll(root)
	nsOf := func(wi int) string {
		if o.Namespaces == 1 {
			return "loop"
		}
		return fmt.Sprintf("loop%d", wi%o.Namespaces)
	}
	trees := make([]*treesync.Tree, o.Workers)
	for i := range trees {
		dir := filepath.Join(root, fmt.Sprintf("worker%d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("lake: %w", err)
		}
		if trees[i], err = treesync.Open(dir, s, &treesync.Options{Namespace: nsOf(i), Lock: &lock.Options{Lease: 10 * time.Second, Wait: 10 * time.Minute}}); err != nil {
			return err
		}
	}
	if o.Lifecycle {
		for i := range o.Namespaces {
			ns, err := s.Namespace(nsOf(i))
			if err != nil {
				return err
			}
			if _, err := ns.SetLifecycle(ctx, datastore.Lifecycle{Enabled: true, Horizon: o.Horizon}); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(w, "%d workers in %d namespace(s), %d iterations each, %d data files per model, lifecycle %v\n\n",
		o.Workers, o.Namespaces, o.Iterations, o.Files, o.Lifecycle)
	fmt.Fprintf(w, "%10s %8s %9s %11s %11s %7s %7s", "iterations", "syncs/s", "contended", "lock wait", "max wait", "commit", "pulled")
	if o.Cost != nil {
		fmt.Fprintf(w, " %9s %10s %10s", "req/sync", "read/sync", "write/sync")
	}
	fmt.Fprintf(w, " %8s %9s %10s %8s %10s\n", "catalog", "cat.feed", "partitions", "feed", "live files")

	// gate stops the workers between iterations while a row is measured.
	var gate sync.RWMutex
	var mu sync.Mutex
	var win struct {
		syncs     int
		contended int
		committed int
		pulled    int
		wait      time.Duration
		maxWait   time.Duration
		start     time.Time
		cost      Cost
		done      int
		reported  int
	}
	win.start = time.Now()
	if o.Cost != nil {
		win.cost = o.Cost()
	}
	total := o.Workers * o.Iterations
	report := func() error {
		d := time.Since(win.start)
		var c Cost
		if o.Cost != nil {
			c = o.Cost()
		}
		sz, err := measureSizes(ctx, s, o.Namespaces, nsOf)
		if err != nil {
			return err
		}
		mean := time.Duration(0)
		if win.syncs > 0 {
			mean = win.wait / time.Duration(win.syncs)
		}
		fmt.Fprintf(w, "%10d %8.1f %8.0f%% %11s %11s %7.2f %7.2f", win.done, float64(win.syncs)/d.Seconds(), 100*float64(win.contended)/float64(max(win.syncs, 1)),
			mean.Round(time.Microsecond), win.maxWait.Round(time.Microsecond),
			float64(win.committed)/float64(max(win.syncs, 1)), float64(win.pulled)/float64(max(win.syncs, 1)))
		if o.Cost != nil {
			n := float64(max(win.syncs, 1))
			fmt.Fprintf(w, " %9.1f %10.1f %10.1f", float64(c.Requests-win.cost.Requests)/n, float64(c.ItemsRead-win.cost.ItemsRead)/n, float64(c.ItemsWritten-win.cost.ItemsWritten)/n)
		}
		fmt.Fprintf(w, " %8d %9d %10d %8d %10d\n", sz.catalog, sz.catalogFeed, sz.partitions, sz.feed, sz.live)
		// The measurement's own requests are not the next window's.
		win.syncs, win.contended, win.committed, win.pulled, win.wait, win.maxWait, win.start = 0, 0, 0, 0, 0, 0, time.Now()
		if o.Cost != nil {
			win.cost = o.Cost()
		}
		return nil
	}
	errs := make(chan error, o.Workers)
	var wg sync.WaitGroup
	var stopped error
	for wi, tr := range trees {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := 1; it <= o.Iterations; it++ {
				gate.RLock()
				reps, err := iteration(ctx, tr, wi, it, o.Files)
				gate.RUnlock()
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, r := range reps {
					win.syncs++
					win.wait += r.LockWait
					win.maxWait = max(win.maxWait, r.LockWait)
					if r.LockContended > 0 {
						win.contended++
					}
					win.committed += r.Committed
					win.pulled += r.Changes
				}
				win.done++
				due := win.done*o.Reports/total > win.reported
				if due {
					win.reported++
				}
				mu.Unlock()
				if due {
					gate.Lock()
					mu.Lock()
					if stopped == nil {
						stopped = report()
					}
					mu.Unlock()
					gate.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	if stopped != nil {
		all = append(all, stopped)
	}
	return errors.Join(all...)
}

// iteration runs one iteration of the seed's loop and returns the reports
// of its two syncs.
func iteration(ctx context.Context, tr *treesync.Tree, wi, it, files int) ([]treesync.Report, error) {
	model := fmt.Sprintf("bench/w%d-i%d", wi, it)
	rep, err := tr.Run(ctx, treesync.Scope{}, func(ctx context.Context, ls *lock.Lease) error {
		content := map[string]string{catalog.DefinitionPath(model): "type: bench\n"}
		for f := range files {
			content[fmt.Sprintf("data/%s/out%d/1/raw", model, f)] = fmt.Sprintf("%s %d token %s\n", model, f, ls.Token())
		}
		for p, c := range content {
			name := filepath.Join(tr.Dir(), filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(name, []byte(c), 0o644); err != nil {
				return err
			}
		}
		return nil
	}, treesync.RunOptions{})
	if err != nil {
		return nil, fmt.Errorf("worker %d iteration %d, run: %w", wi, it, err)
	}
	reps := []treesync.Report{rep}
	// Model delete: the definition goes; the data stays, orphaned, until
	// the lifecycle (if enabled) drops the model.
	def := catalog.DefinitionPath(model)
	if err := os.Remove(filepath.Join(tr.Dir(), filepath.FromSlash(def))); err != nil {
		return nil, fmt.Errorf("lake: %w", err)
	}
	if err := tr.MarkDirty(def); err != nil {
		return nil, err
	}
	rep, err = tr.Sync(ctx, treesync.Scope{})
	if err != nil {
		return nil, fmt.Errorf("worker %d iteration %d, delete: %w", wi, it, err)
	}
	return append(reps, rep), nil
}

// sizes are the metadata structures lake keeps for the datastore.
type sizes struct {
	catalog, catalogFeed, partitions, feed, live int
}

// measureSizes counts, over the loop's namespaces and the catalog: catalog rows
// and catalog feed entries (rows and their tombstones), registered
// partitions, feed entries (one per path: live files and tombstones) and
// live files.
func measureSizes(ctx context.Context, s *datastore.Store, namespaces int, nsOf func(int) string) (sizes, error) {
	var z sizes
	count := func(st *datastore.Store) (parts, entries, live int, err error) {
		ps, err := st.Partitions(ctx)
		if err != nil {
			return 0, 0, 0, err
		}
		for _, p := range ps {
			h, err := st.Head(ctx, p)
			if err != nil {
				return 0, 0, 0, err
			}
			after := h.Floor
			for {
				ch, upTo, err := st.Changes(ctx, p, after, datastore.MaxListLimit)
				if err != nil {
					return 0, 0, 0, err
				}
				for _, c := range ch {
					entries++
					if !c.Deleted {
						live++
					}
				}
				if len(ch) < datastore.MaxListLimit {
					break
				}
				after = upTo
			}
		}
		return len(ps), entries, live, nil
	}
	for i := range namespaces {
		ns, err := s.Namespace(nsOf(i))
		if err != nil {
			return z, err
		}
		p, e, l, err := count(ns)
		if err != nil {
			return z, err
		}
		z.partitions += p
		z.feed += e
		z.live += l
	}
	cat, err := s.CatalogStore()
	if err != nil {
		return z, err
	}
	_, e, l, err := count(cat)
	if err != nil {
		return z, err
	}
	z.catalog, z.catalogFeed = l, e
	return z, nil
}

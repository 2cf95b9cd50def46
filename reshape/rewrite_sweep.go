package reshape

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/sweep"
)

// RewriteOptions configure Apply, Finalize and Rollback of a key rewrite.
type RewriteOptions struct {
	// Segments, PageSize and MaxWCU are the sweep's (see sweep.Options);
	// MaxWCU counts both writes of each transaction.
	Segments int
	PageSize int
	MaxWCU   float64
	// Workers is how many items of one page are handled at once
	// (DefaultWorkers).
	Workers int
	// DryRun writes nothing (and records no phase or cursor): it counts
	// what would be written.
	DryRun bool
	// Settle is how long Finalize and Rollback wait after recording their
	// phase before they sweep, so that every helper has read it (0: twice
	// RefreshInterval; negative: no wait).
	Settle time.Duration
	// MaxPasses bounds the passes of Finalize and Rollback, which sweep
	// again until a whole pass finds nothing left to do (DefaultMaxPasses).
	MaxPasses int
	// Progress, when set, is called after each page.
	Progress func(sweep.Progress)
}

// DefaultMaxPasses is RewriteOptions.MaxPasses's default.
const DefaultMaxPasses = 5

// itemFunc handles one scanned item and names what it did (the counter
// it adds to) and how often a condition failed on the way.
type itemFunc func(ctx context.Context, item map[string]types.AttributeValue, spend Spender, dry bool) (outcome string, retries int, err error)

// checkpoints is where the passes called name keep their cursors.
func (r *Rewrite) checkpoints(name string) sweep.StoreCheckpoints {
	return sweep.StoreCheckpoints{Store: r.state, Prefix: r.StatePrefix() + name + "/"}
}

// pass runs one sweep over the whole table under the durable cursors
// StatePrefix()+name+"/", resuming an interrupted one. A pass that had
// finished is forgotten first, so that each call makes at least one whole
// pass over the table; fresh, when set, is called before a pass starts from
// the beginning.

func (r *Rewrite) pass(ctx context.Context, name string, o RewriteOptions, fn itemFunc, fresh func(context.Context) error) (sweep.Summary, error) {
	so := sweep.Options{
		Table: r.spec.Table, Segments: o.Segments, PageSize: o.PageSize, MaxWCU: o.MaxWCU,
		DryRun: o.DryRun, Progress: o.Progress, ConsistentRead: true,
	}
	if !o.DryRun {
		cp := r.checkpoints(name)
		st, err := cp.Load(ctx)
		if err != nil {
			return sweep.Summary{}, err
		}
		if st != nil && st.Done() {
			if err := cp.Reset(ctx); err != nil {
				return sweep.Summary{}, err
			}
			st = nil
		}
		if st == nil && fresh != nil {
			if err := fresh(ctx); err != nil {
				return sweep.Summary{}, err
			}
		}
		so.Checkpoints = cp
	}
	workers := o.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	return sweep.Run(ctx, r.api, so, func(ctx context.Context, p *sweep.Page) error {
		return eachItem(ctx, p, workers, func(item map[string]types.AttributeValue) error {
			outcome, retries, err := fn(ctx, item, p.Spend, p.DryRun)
			var ip *itemProblem
			if errors.As(err, &ip) {
				// The item's own data: counted, named, and the sweep goes on.
				outcome, err = ip.outcome, nil
				r.problems.note(ItemRef{Key: KeyString(r.OldKey(item)), State: ip.outcome, Detail: ip.detail})
			}
			if err != nil {
				return err
			}
			p.Count(outcome, 1)
			if retries > 0 {
				p.Count("retries", int64(retries))
			}
			return nil
		})
	})
}

// itemProblem is an item a pass cannot handle because of its own data (its
// new key cannot be derived, DynamoDB refuses its copy, it holds the
// marker): the pass counts it under outcome, names it, and goes on, so that
// one item never blocks the sweep of every other.
type itemProblem struct{ outcome, detail string }

func (p *itemProblem) Error() string { return p.outcome + ": " + p.detail }

// problemLog names the items of a run's itemProblems (at most DefaultList).
type problemLog struct {
	mu    sync.Mutex
	items []ItemRef
}

func (l *problemLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = nil
}

func (l *problemLog) note(ref ItemRef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.items) < DefaultList {
		l.items = append(l.items, ref)
	}
}

// Problems returns the items the last Apply could not handle, with why (at
// most DefaultList; the summary's counts hold them all).
func (r *Rewrite) Problems() []ItemRef {
	r.problems.mu.Lock()
	defer r.problems.mu.Unlock()
	return slices.Clone(r.problems.items)
}

// err is nil when sum counts none of the outcomes; else an error matching
// metastore.ErrRefused that names the items.
func (l *problemLog) err(sum sweep.Summary, outcomes ...string) error {
	n := int64(0)
	for _, o := range outcomes {
		n += sum.Counts[o]
	}
	if n == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var names []string
	for i, it := range l.items {
		if i == 5 {
			names = append(names, "…")
			break
		}
		names = append(names, it.Key+" ("+it.State+": "+it.Detail+")")
	}
	return fmt.Errorf("%w: reshape: %d items could not be handled and were skipped: %s", metastore.ErrRefused, n, strings.Join(names, "; "))
}

// eachItem calls f for a page's items, workers at a time, and returns the
// first error (or ctx's).
func eachItem(ctx context.Context, p *sweep.Page, workers int, f func(map[string]types.AttributeValue) error) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     = make(chan map[string]types.AttributeValue)
	)
	for range min(workers, len(p.Items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for item := range next {
				if err := f(item); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, item := range p.Items {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		next <- item
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

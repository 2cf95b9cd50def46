package reshape

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/sweep"
)

// ApplyOptions configure Apply.
type ApplyOptions struct {
	// Segments, PageSize and MaxWCU are the sweep's (see sweep.Options).
	// MaxWCU counts the index writes too: DynamoDB bills each index write
	// as a write.
	Segments int
	PageSize int
	MaxWCU   float64
	// Workers is how many items of one page are converted at once
	// (DefaultWorkers).
	Workers int
	// DryRun creates nothing and writes nothing: it reports whether the
	// index would be created and counts what the sweep would write.
	DryRun bool
	// State keeps the sweep's durable cursors; nil remembers nothing (a
	// crash then restarts the sweep from the beginning).
	State *metastore.Store
	// Index configures the wait for the index.
	Index IndexOptions
	// Progress, when set, is called after each page.
	Progress func(sweep.Progress)
}

// DefaultWorkers is ApplyOptions.Workers's default.
const DefaultWorkers = 4

// ApplyResult is what Apply did.
type ApplyResult struct {
	// IndexCreated says Apply added the index (in a dry run: would add it).
	IndexCreated bool
	// Sweep is the sweep's summary. Its Counts hold one count per Outcome
	// ("wrote", "repaired", "gone", "contended", "failed", "unchanged")
	// and per State of the items as first read ("missing", "stale", ...).
	Sweep sweep.Summary
	// Failed names the items that could not be converted (at most
	// DefaultList of them; Sweep.Counts["failed"] counts them all), each
	// with its reason. The sweep went on past them.
	Failed []ItemRef
	// Checking says the pass ran before the spec's ownership of its
	// derived attributes was established: values it did not write were
	// reported as foreign, not repaired.
	Checking bool
}

// Err is nil when every covered item was converted or left for a reason
// that is not the item's (gone, contended); else an error matching
// metastore.ErrRefused that names the items that could not be converted.
func (a ApplyResult) Err() error {
	n := a.Sweep.Counts[Failed.String()]
	if n == 0 {
		return nil
	}
	var names []string
	for i, f := range a.Failed {
		if i == 5 {
			names = append(names, "…")
			break
		}
		names = append(names, f.Key+" ("+f.Detail+")")
	}
	return fmt.Errorf("%w: reshape: %d items could not be converted and were skipped: %s", metastore.ErrRefused, n, strings.Join(names, "; "))
}

// Apply runs the reshape: it adds the index if it is missing and waits until
// it is ACTIVE (EnsureIndex), then sweeps the whole table and converts every
// covered item that is missing the new attributes or holds stale ones
// (Convert, one conditional UpdateItem per item). With State, the sweep
// resumes after a crash where it stopped, redoing at most one page per
// segment; a sweep that had finished is forgotten, so that every Apply makes
// at least one whole pass (which is how stale items are repaired).
func (r *Reshaper) Apply(ctx context.Context, opts ApplyOptions) (ApplyResult, error) {
	var res ApplyResult
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	checking, err := r.ownership(ctx, opts)
	if err != nil {
		return res, err
	}
	r.checking.Store(checking)
	res.Checking = checking
	if opts.DryRun {
		res.IndexCreated = !r.IndexExists()
	} else {
		created, err := r.EnsureIndex(ctx, opts.Index)
		if err != nil {
			return res, err
		}
		res.IndexCreated = created
	}
	so := sweep.Options{
		Table:    r.spec.Table,
		Segments: opts.Segments,
		PageSize: opts.PageSize,
		MaxWCU:   opts.MaxWCU,
		DryRun:   opts.DryRun,
		Progress: opts.Progress,
	}
	if opts.State != nil {
		cp := sweep.StoreCheckpoints{Store: opts.State, Prefix: r.StatePrefix()}
		st, err := cp.Load(ctx)
		if err != nil {
			return res, err
		}
		if st != nil && st.Done() && !opts.DryRun {
			if err := cp.Reset(ctx); err != nil {
				return res, err
			}
		}
		so.Checkpoints = cp
	}
	var failMu sync.Mutex
	failed := func(ref ItemRef) {
		failMu.Lock()
		defer failMu.Unlock()
		if len(res.Failed) < DefaultList {
			res.Failed = append(res.Failed, ref)
		}
	}
	sum, err := sweep.Run(ctx, r.api, so, func(ctx context.Context, p *sweep.Page) error {
		return r.convertPage(ctx, p, opts.Workers, failed)
	})
	res.Sweep = sum
	if err == nil && checking && !opts.DryRun && opts.State != nil && sum.Counts[Foreign.String()] == 0 {
		// A whole pass found no value it did not write: from now on a
		// derived value that differs is stale (a source changed after the
		// conversion) and is repaired.
		err = opts.State.Put(ctx, r.ownerKey(), []byte(ownerOwned))
	}
	return res, err
}

// The values of the ownership record (Reshaper.ownerKey).
const (
	ownerChecking = "checking"
	ownerOwned    = "owned"
)

// ownerKey is the state record that says whether the spec owns its derived
// attributes. It lies beside the sweep's cursors, not under StatePrefix,
// which a finished sweep's reset clears.
func (r *Reshaper) ownerKey() string {
	return strings.TrimSuffix(r.StatePrefix(), "/") + ".owner"
}

// ownership says whether apply runs in checking mode: a spec whose index
// did not exist when its first apply began has not written any derived
// value yet, so until one whole pass has found none of another writer's, a
// derived value that differs from the derivation is the item's own
// (Foreign), never a stale conversion to repair. The record makes a resumed
// apply (the index now exists) keep checking. Without a record, an index
// that already exists (an apply of an earlier version of lake, an index the
// spec describes) means the values are the spec's.
func (r *Reshaper) ownership(ctx context.Context, opts ApplyOptions) (bool, error) {
	if opts.State == nil {
		return !r.IndexExists(), nil
	}
	v, err := opts.State.Get(ctx, r.ownerKey())
	switch {
	case err == nil:
		return string(v) == ownerChecking, nil
	case !errors.Is(err, metastore.ErrNotFound):
		return false, err
	case r.IndexExists():
		return false, nil
	case opts.DryRun:
		return true, nil
	}
	// Recorded before the index is created, so that a crash after it
	// still finds the spec checking.
	return true, opts.State.Put(ctx, r.ownerKey(), []byte(ownerChecking))
}

// convertPage converts a page's items, workers at a time, and hands each
// item that could not be converted to failed.
func (r *Reshaper) convertPage(ctx context.Context, p *sweep.Page, workers int, failed func(ItemRef)) error {
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
				first := r.spec.classify(item, r.checking.Load()).State
				res, err := r.convert(ctx, item, p.Spend, p.DryRun)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				p.Count(first.String(), 1)
				p.Count(res.Outcome.String(), 1)
				if res.Outcome == Failed {
					failed(ItemRef{Key: KeyString(r.tab().key(item)), State: res.Verdict.State.String(), Detail: res.Reason})
				}
				if res.Retries > 0 {
					p.Count("retries", int64(res.Retries))
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

// StatePrefix is where Apply keeps its sweep's cursors in the state store:
// reshape/TABLE/INDEX/ and a digest of the spec, so that a changed spec
// starts a sweep of its own instead of resuming another's cursors.
func (r *Reshaper) StatePrefix() string {
	b, _ := json.Marshal(r.spec)
	h := sha256.Sum256(b)
	return fmt.Sprintf("reshape/%s/%s/%s/", r.spec.Table, r.spec.Index.Name, hex.EncodeToString(h[:6]))
}

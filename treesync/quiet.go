package treesync

import (
	"context"
	stdsync "sync"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/datastore/lifecycle"
)

// preRead is what quiet read before the lock for a sync that must go on:
// the catalog's changes are then not read again.
type preRead struct {
	catalogRead bool
	dropped     []string
}

// quiet reports whether a sync with nothing to push can end before the
// lock, because a few reads prove there is nothing to pull and nothing to
// maintain:
//
//   - the tree retries no skipped path, and its last sync's catalog fold
//     and lifecycle completed (st.Policy is set; a failed one is done again
//     by the next sync, under the lock);
//   - no partition of the scope moved past the tree's positions: one
//     ChangedPartitions read from the unscoped cursor, or, scoped, each
//     model's Head. The cursor then moves as a locked pull would move it:
//     a cursor is a snapshot that every later commit moves past, lock or
//     no lock (DynamoDB's shard counters are written in the same
//     transaction as the index entries, and commit records are settled
//     before they are read; S3's are the heads' ETags, pending commits
//     settled first; bolt's one transaction), which catalog.Read and
//     Status rely on already: a commit in flight during this read is read
//     by the next sync;
//   - the catalog's changes since the tree's cursor (read as any sync
//     reads them: the catalog is written by other namespaces' folds
//     without this lock anyway) remove no model of the namespace;
//   - the namespace's lifecycle policy is the one the last maintenance ran
//     with, and, if enabled, plans nothing from the mirror now (an
//     orphaned model whose retention ran out since is due) and its reclaim
//     is not due.
//
// Nothing is written remotely, so fencing is not involved. Any read that
// fails or finds something sends the sync down the locked path.
//
// The three reads (the scope's moves, the catalog's changes, the
// namespace's configuration) go at once: none depends on another's answer,
// each is a snapshot of its own as it was when they were made one after
// another, and a sync that goes on under the lock uses the catalog's
// changes and the configuration read here, as it did when quiet read them
// last. On S3 a sync with nothing changed waits one round trip, not three.
func (t *Tree) quiet(ctx context.Context, st *state, models []string, rep *Report, sk *skips) (done bool, pre *preRead, err error) {
	if len(st.Skipped) > 0 || t.opts.Catalog == CatalogExport {
		return false, nil, nil
	}
	if t.opts.Catalog != CatalogOff && st.Policy == nil {
		return false, nil, nil
	}
	if len(models) == 0 {
		if !st.Unscoped {
			return false, nil, nil
		}
		ctx, _ = t.readAhead(ctx, st, true, false, nil) // readahead.go
	}
	var (
		moved   bool
		next    string
		ch      catalog.Changes
		catNext catalog.Cursor
		catErr  error
		cfg     datastore.NamespaceConfig
		cfgErr  error
		wg      stdsync.WaitGroup
	)
	pullStart := time.Now()
	wg.Go(func() { moved, next = t.scopeMoved(ctx, st, models) })
	if t.opts.Catalog != CatalogOff {
		wg.Go(func() { ch, catNext, catErr = catalog.Read(ctx, t.root, st.Catalog) })
		wg.Go(func() { cfg, cfgErr = t.store.Config(ctx) })
	}
	wg.Wait()
	if t.opts.Catalog != CatalogOff && cfgErr == nil {
		st.config = &cfg // the locked path's, if quiet fails (policy.go)
	}
	if moved {
		if t.opts.Catalog == CatalogOff || catErr != nil {
			return false, nil, nil // the locked path reads it again and says why
		}
		dropped, err := t.applyCatalogOrHeal(ctx, st, rep, sk, ch, catNext)
		if err != nil {
			return false, nil, err
		}
		return false, &preRead{catalogRead: true, dropped: dropped}, nil
	}
	defer func() {
		if done && len(models) == 0 {
			st.Cursor = next
		}
	}()
	if t.opts.Catalog == CatalogOff {
		return true, nil, nil
	}
	if catErr != nil {
		return false, nil, catErr
	}
	dropped, err := t.applyCatalogOrHeal(ctx, st, rep, sk, ch, catNext)
	rep.Pull = time.Since(pullStart)
	if err != nil {
		return false, nil, err
	}
	pre = &preRead{catalogRead: true, dropped: dropped}
	if len(dropped) > 0 {
		return false, pre, nil
	}
	if cfgErr != nil || cfg.Lifecycle != *st.Policy {
		return false, pre, nil
	}
	if p := cfg.Lifecycle; p.Enabled {
		if t.reclaimDue(st, p) {
			return false, pre, nil
		}
		mirror, err := t.loadCatalog()
		if err != nil {
			return false, pre, nil
		}
		var rows []catalog.Row
		for _, r := range mirror {
			if r.Namespace == t.opts.Namespace {
				rows = append(rows, r)
			}
		}
		if len(lifecycle.Plan(rows, p, t.store.Now())) > 0 {
			return false, pre, nil
		}
	}
	return true, pre, nil
}

// scopeMoved reports whether a partition of the scope moved past the
// tree's positions (a failed read counts as moved: the locked path reads
// it again), and, unscoped, the cursor the read reached.
func (t *Tree) scopeMoved(ctx context.Context, st *state, models []string) (bool, string) {
	if len(models) == 0 {
		heads, next, err := t.store.ChangedPartitions(ctx, st.Cursor)
		if err != nil {
			return true, ""
		}
		for _, h := range heads {
			if h.Seq > st.Positions[h.Partition] {
				return true, ""
			}
		}
		return false, next
	}
	for _, m := range models {
		h, err := t.store.Head(ctx, m)
		if err != nil || h.Seq > st.Positions[m] {
			return true, ""
		}
	}
	return false, ""
}

// reclaimDue reports whether the lifecycle's Reclaim is due: at most every
// quarter of the horizon.
func (t *Tree) reclaimDue(st *state, p datastore.Lifecycle) bool {
	horizon := p.Horizon
	if horizon == 0 {
		horizon = datastore.DefaultHorizon
	}
	return t.now().Sub(time.Unix(0, st.Reclaimed)) >= horizon/4
}

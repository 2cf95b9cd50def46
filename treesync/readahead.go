package treesync

import (
	"context"
	"maps"
	"slices"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
)

// readAhead returns a context whose reads before the commit (the batch
// stat of the dirty paths stat, this namespace's changed partitions when
// the pull is unscoped, the catalog's when it is to be read, the
// namespace's configuration when this sync has not read it) are served by
// one read made now (datastore.Store.ReadAhead: one BatchGetItem on
// DynamoDB instead of up to three and a GetItem; elsewhere ctx as it is).
// Issue 31. The context is for those reads only: quiet's, or the locked
// sync's stat, pull and configuration read before the commit, never the
// commit or the catalog fold after it (which must see the commit). A failed read-ahead is not
// reported: the reads then go to the store one by one and report their own
// failures.
//
// With the dirty paths' stat it also reads their models' catalog rows
// where the driver can in the same request, and returns them for the
// sync's catalog fold (rows: catalog.FoldOptions.Rows).
func (t *Tree) readAhead(ctx context.Context, st *state, unscoped, catalogRead bool, stat []string) (_ context.Context, rows map[string]datastore.Info) {
	var scopes []*datastore.Store
	var records []string
	known := ctx
	if unscoped {
		scopes = append(scopes, t.store)
	}
	if t.opts.Catalog == CatalogIncremental && !catalogRead {
		if cat, err := t.root.CatalogStore(); err == nil {
			scopes = append(scopes, cat)
			known = datastore.WithKnownPartitions(known, cat, knownNamespaces(st))
		}
	}
	if t.opts.Catalog != CatalogOff && st.config == nil {
		records = append(records, t.store.ConfigRecord())
	}
	reads := len(scopes) + len(records)
	if len(stat) > 0 {
		reads++
	}
	paths := t.rowsAhead(stat)
	if len(paths) > 0 {
		reads++
	}
	if reads < 2 {
		return ctx, nil // one read either way
	}
	if len(paths) > 0 {
		if actx, rows, ok := t.readAheadRows(known, scopes, records, stat, paths); ok {
			return actx, rows
		}
	}
	actx, err := t.store.ReadAhead(known, scopes, records, stat)
	if err != nil {
		return ctx, nil
	}
	return actx, nil
}

// readAheadAfterRun returns the contexts of the stat of the paths Run's
// function left dirty (found only after it ran, so not in the read-ahead
// made before it) and of the commit of them: where the driver can
// (DynamoDB, datastore.Store.ReadStatsForCommits), one TransactGetItems
// reads their states, their models' catalog rows and what the sync's
// commit and its catalog fold's commit read, instead of a stat's read and
// a commit's (issue 31: one request less a `lake data run` or a bench
// loop's sync that commits); else, where it can, the stat with the rows
// (one BatchGetItem instead of the stat's and the fold's reads), the
// commit reading for itself. The rows are kept for the sync's catalog fold
// as a Sync's read-ahead keeps them (read under the lock, before the
// commit). Otherwise ctx as it is, twice: each reads for itself.
func (t *Tree) readAheadAfterRun(ctx context.Context, dirty []LocalChange, rep *Report) (stat, commit context.Context) {
	paths := dirtyPaths(dirty)
	rows := t.rowsAhead(paths)
	if len(paths) == 0 {
		return ctx, ctx
	}
	keep := func(got map[string]datastore.Info) {
		if rep.rows == nil && got != nil {
			rep.rows = map[string]datastore.Info{}
		}
		maps.Copy(rep.rows, got) // read later than any read before the function ran
	}
	if sctx, cctx, got, ok := t.readForCommits(ctx, paths, rows); ok {
		keep(got)
		return sctx, cctx
	}
	if len(rows) == 0 {
		return ctx, ctx
	}
	actx, got, ok := t.readAheadRows(ctx, nil, nil, paths, rows)
	if !ok {
		return ctx, ctx
	}
	keep(got)
	return actx, ctx
}

// readForCommits is datastore.Store.ReadStatsForCommits of the dirty
// paths stat and of their models' catalog rows (none with the catalog
// off), with the rows taken from it at once, for the fold. ok is false
// when the driver did not read them.
func (t *Tree) readForCommits(ctx context.Context, stat, paths []string) (sctx, cctx context.Context, rows map[string]datastore.Info, ok bool) {
	stats := map[*datastore.Store][]string{t.store: stat}
	var cat *datastore.Store
	if len(paths) > 0 {
		var err error
		if cat, err = t.store.CatalogStore(); err != nil {
			return ctx, ctx, nil, false
		}
		stats[cat] = paths
	}
	sctx, cctx, ok, err := t.store.ReadStatsForCommits(ctx, stats)
	if err != nil || !ok {
		return ctx, ctx, nil, false
	}
	if cat == nil {
		return sctx, cctx, nil, true
	}
	return sctx, cctx, statRows(sctx, cat, paths), true
}

// maxKnownNamespaces bounds the catalog namespaces whose heads a
// read-ahead reads: each is an item read (a read unit on DynamoDB) on
// every sync, to save the Query of a changed shard of the catalog's index.
const maxKnownNamespaces = 16

// knownNamespaces returns the namespaces of the catalog the tree's catalog
// cursor holds positions of, whose heads can stand for a listing of the
// catalog's index (datastore.WithKnownPartitions): the catalog is where
// other writers' changes are expected on every sync (each namespace's fold
// moves its one partition there). None when there are more than
// maxKnownNamespaces: a shard's window is filled only when every namespace
// that moved in it is known, so part of many would cost items for few
// Queries saved. The tree's own partitions are not named: their changes
// are mostly its own commits, which its cursor already moved past, and a
// tree of many models would read a head for each on every sync.
func knownNamespaces(st *state) []string {
	if len(st.Catalog.Positions) > maxKnownNamespaces {
		return nil
	}
	return slices.Sorted(maps.Keys(st.Catalog.Positions))
}

// dirtyPaths returns the paths decide stats.
func dirtyPaths(dirty []LocalChange) []string {
	out := make([]string, len(dirty))
	for i, c := range dirty {
		out[i] = c.Path
	}
	return out
}

// rowsAhead returns the catalog row paths of the models of the dirty
// paths stat, whose rows this sync's catalog fold reads (the models its
// commit changes), when the fold runs.
func (t *Tree) rowsAhead(stat []string) []string {
	if t.opts.Catalog == CatalogOff {
		return nil
	}
	seen := map[string]bool{}
	var rows []string
	for _, p := range stat {
		m := t.store.Partition(p)
		if seen[m] || !catalog.IsModel(m) {
			continue
		}
		seen[m] = true
		rows = append(rows, catalog.RowPath(t.store.NamespaceName(), m))
	}
	return rows
}

// readAheadRows is readAhead's read with the catalog rows of the dirty
// models in the same request (DynamoDB: one BatchGetItem), taken from it
// at once, for the fold (catalog.FoldOptions.Rows: read under the lock,
// after acquiring it, like the states of the stat). ok is false when the
// driver cannot: the fold then reads the rows itself.
func (t *Tree) readAheadRows(ctx context.Context, scopes []*datastore.Store, records, stat, paths []string) (_ context.Context, rows map[string]datastore.Info, ok bool) {
	cat, err := t.store.CatalogStore()
	if err != nil {
		return ctx, nil, false
	}
	actx, ok, err := t.store.ReadAheadStats(ctx, scopes, records, map[*datastore.Store][]string{t.store: stat, cat: paths})
	if err != nil || !ok {
		return ctx, nil, false
	}
	return actx, statRows(actx, cat, paths), true
}

// statRows returns the catalog rows paths as read ahead in ctx (no
// request), an absent one as deleted; nil if they cannot be had (the fold
// then reads them).
func statRows(ctx context.Context, cat *datastore.Store, paths []string) map[string]datastore.Info {
	got, err := cat.StatMany(ctx, paths) // from the read-ahead: no request
	if err != nil {
		return nil
	}
	rows := map[string]datastore.Info{}
	for _, p := range paths {
		if info, ok := got[p]; ok {
			rows[p] = info
		} else {
			rows[p] = datastore.Info{Path: p, Deleted: true}
		}
	}
	return rows
}

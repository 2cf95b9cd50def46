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

// readAheadAfterRun returns the context of the stat of the paths Run's
// function left dirty (found only after it ran, so not in the read-ahead
// made before it): with their models' catalog rows in the same read where
// the driver can (DynamoDB: one BatchGetItem instead of the stat's
// TransactGetItems and the fold's own read of the rows, one request less
// a `lake data run` or a bench loop's sync that commits, issue 31), those
// rows kept for the sync's catalog fold as a Sync's read-ahead keeps them
// (read under the lock, before the commit). Otherwise ctx as it is: the
// stat and the fold read for themselves.
func (t *Tree) readAheadAfterRun(ctx context.Context, dirty []LocalChange, rep *Report) context.Context {
	stat := dirtyPaths(dirty)
	paths := t.rowsAhead(stat)
	if len(stat) == 0 || len(paths) == 0 {
		return ctx
	}
	actx, rows, ok := t.readAheadRows(ctx, nil, nil, stat, paths)
	if !ok {
		return ctx
	}
	if rep.rows == nil && rows != nil {
		rep.rows = map[string]datastore.Info{}
	}
	maps.Copy(rep.rows, rows) // read later than any read before the function ran
	return actx
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
	got, err := cat.StatMany(actx, paths) // from the read-ahead: no request
	if err != nil {
		return actx, nil, true // the fold reads them
	}
	rows = map[string]datastore.Info{}
	for _, p := range paths {
		if info, ok := got[p]; ok {
			rows[p] = info
		} else {
			rows[p] = datastore.Info{Path: p, Deleted: true}
		}
	}
	return actx, rows, true
}

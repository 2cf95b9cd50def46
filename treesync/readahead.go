package treesync

import (
	"context"

	"github.com/lakemeta/lake/datastore"
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
func (t *Tree) readAhead(ctx context.Context, st *state, unscoped, catalogRead bool, stat []string) context.Context {
	var scopes []*datastore.Store
	var records []string
	if unscoped {
		scopes = append(scopes, t.store)
	}
	if t.opts.Catalog == CatalogIncremental && !catalogRead {
		if cat, err := t.root.CatalogStore(); err == nil {
			scopes = append(scopes, cat)
		}
	}
	if t.opts.Catalog != CatalogOff && st.config == nil {
		records = append(records, t.store.ConfigRecord())
	}
	reads := len(scopes) + len(records)
	if len(stat) > 0 {
		reads++
	}
	if reads < 2 {
		return ctx // one read either way
	}
	actx, err := t.store.ReadAhead(ctx, scopes, records, stat)
	if err != nil {
		return ctx
	}
	return actx
}

// dirtyPaths returns the paths decide stats.
func dirtyPaths(dirty []LocalChange) []string {
	out := make([]string, len(dirty))
	for i, c := range dirty {
		out[i] = c.Path
	}
	return out
}

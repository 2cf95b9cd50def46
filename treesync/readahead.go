package treesync

import (
	"context"

	"github.com/lakemeta/lake/datastore"
)

// readAhead returns a context whose pull reads (this namespace's changed
// partitions when the pull is unscoped, the catalog's when it is to be
// read, the namespace's configuration when this sync has not read it) are
// served by one read made now (datastore.Store.ReadAhead: one BatchGetItem
// on DynamoDB instead of two and a GetItem; elsewhere ctx as it is). Issue
// 31. The context is for those reads only: quiet's, or the locked pull's
// and the configuration read before the commit, never the catalog fold
// after the commit (which must see the commit). A failed read-ahead is not
// reported: the reads then go to the store one by one and report their own
// failures.
func (t *Tree) readAhead(ctx context.Context, st *state, unscoped, catalogRead bool) context.Context {
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
	if len(scopes)+len(records) < 2 {
		return ctx // one read either way
	}
	actx, err := t.root.ReadAhead(ctx, scopes, records)
	if err != nil {
		return ctx
	}
	return actx
}

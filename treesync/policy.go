package treesync

import (
	"context"

	"github.com/lakemeta/lake/datastore"
)

// The namespace's configuration (its lifecycle policy) is read once per
// sync (issue 31). The catalog's maintenance needs it after the commit,
// and the commit registers the namespace (a conditional put of the same
// record, once per process, so once per `lake data sync`). Read before the
// commit instead, it serves both: a record read present tells the store
// the namespace is registered (datastore's knownRegistered), and the
// maintenance uses the same read. A sync that tried to end without the
// lock (quiet) and read it then uses that read.
//
// It cannot be staler than before in any way that matters: the policy is
// not written under the namespace's lock (`lake data lifecycle` changes it
// whenever it runs), so a read anywhere within the sync is as good a
// snapshot as one after the commit; a change racing the sync is applied by
// the next one, as before.

// readConfigBeforeCommit reads the namespace's configuration into st when
// the maintenance will need it and no read of this sync has it yet. A
// failure is not this sync's: the maintenance reads it again and reports
// one there.
func (t *Tree) readConfigBeforeCommit(ctx context.Context, st *state) {
	if t.opts.Catalog == CatalogOff || st.config != nil {
		return
	}
	if cfg, err := t.store.Config(ctx); err == nil {
		st.config = &cfg
	}
}

// syncConfig returns the namespace's configuration as this sync read it,
// reading it now if it did not.
func (t *Tree) syncConfig(ctx context.Context, st *state) (datastore.NamespaceConfig, error) {
	if st.config != nil {
		return *st.config, nil
	}
	cfg, err := t.store.Config(ctx)
	if err == nil {
		st.config = &cfg
	}
	return cfg, err
}

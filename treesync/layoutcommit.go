package treesync

import (
	"context"
	"errors"

	"github.com/lakemeta/lake/datastore"
)

// The remembered layout proved by the commit (issue 31). A Sync that has
// something to do used to read the layout record before it uploaded,
// pulled or committed: one request per sync. A Sync (not Run: its function
// runs on the pulled tree, and may act outside it, so Run proves the
// layout before it decides anything: runlayout.go) now goes on with the
// layout its tree remembers and proves it at the first step that cannot be
// undone:
//
//   - uploads are of content, filed by version, whatever the layout: an
//     upload a stale layout made is an abandoned upload, reclaimed as any;
//   - the batch stat and the pull's reads only read; what they decide lives
//     in memory (the state is saved only after the commit) until
//   - the tree is written (pulled changes applied): the record is read
//     first, as before, if the sync has anything to apply; and
//   - the commit, which, on a store that can (datastore.LayoutCommitter:
//     DynamoDB), carries the check in its own transaction and is refused
//     whole with datastore.ErrStaleLayout if the datastore records another
//     layout; any other store's commit reads the record first.
//
// A sync with neither reads the record after its commit point (layoutProved),
// before it saves its state or maintains the catalog, and one that fails
// before anything proved the layout reads it before it reports the failure
// (staleBeforeRefused). A stale layout thus
// ends the sync with ErrStaleLayout having written nothing, remotely or in
// the tree's state, as a stale layout read first did; the tree forgets it
// and `lake data sync` starts again with the record read
// (TestRememberedLayoutStale, TestRememberedLayoutStaleAtTheCommit).

// layoutProved makes sure, once the commit stood (or there was none), that
// the layout the sync used is the datastore's: no request if the commit
// proved it, one read if nothing did.
func (t *Tree) layoutProved(ctx context.Context) error {
	if t.root.LayoutVerified() {
		t.rememberLayout()
		return nil
	}
	return t.verifyLayout(ctx)
}

// forgetStaleLayout forgets the remembered layout when err says it is
// stale.
func (t *Tree) forgetStaleLayout(err error) {
	if errors.Is(err, datastore.ErrStaleLayout) {
		_ = t.fs.removeState(layoutFile)
	}
}

// staleBeforeRefused returns, for a sync that failed before anything proved
// its layout, the stale layout's error rather than err when the record
// names another layout (one read, on failure only): what a stale layout
// decided (a conflict found in the wrong partition, say) must not stand as
// the reason, or the tree would keep the layout and refuse every sync the
// same way. A failure to read the record leaves err as it is.
func (t *Tree) staleBeforeRefused(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, datastore.ErrStaleLayout) || t.root.LayoutVerified() || ctx.Err() != nil {
		return err
	}
	if verr := t.verifyLayout(ctx); errors.Is(verr, datastore.ErrStaleLayout) {
		return verr
	}
	return err
}

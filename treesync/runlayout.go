package treesync

import "context"

// The remembered layout in Run (issue 31). A `lake data run` opened the
// datastore without the layout its tree remembers and read the layout
// record first: one request in every run, the seed's loop as one command.
// Run now opens with it as Sync does (layoutcommit.go), but proves it
// sooner than Sync: its function runs on the pulled tree and may act
// outside it, where nothing can be undone, so the layout is proved under
// the lock before the sync decides anything with it (the dirty paths'
// states, the pull's plan, the catalog's dropped models) and before the
// function runs. The proof costs no request when the catalog is on: the
// namespace's entry, read ahead for its lifecycle policy (readahead.go),
// names the layout the datastore recorded (datastore/layoutproof.go says
// why that holds). Otherwise the record is read, as before. A stale layout
// ends the run with datastore.ErrStaleLayout before the function ran,
// having written no file and nothing in the tree (only the lock's
// acquisition and release, and a takeover's fence entries), and the tree
// forgets it (`lake data run` then opens the datastore again without
// it: TestRunRememberedLayoutStale).

// runLayout proves the layout before Run decides anything with it: it
// takes the namespace's configuration from the read-ahead (rctx), which
// the maintenance would read before the commit anyway, then verifies the
// layout with ctx (no request once the entry proved it).
func (t *Tree) runLayout(rctx, ctx context.Context, st *state) error {
	t.readConfigBeforeCommit(rctx, st) // policy.go
	return t.verifyLayout(ctx)
}

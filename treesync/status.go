package treesync

import (
	"context"
	"sort"

	"github.com/lakemeta/lake/datastore"
)

// Status is what a sync would do, found without the lock and without
// changing anything.
type Status struct {
	// Local are the dirty paths.
	Local []LocalChange
	// Remote are the changes not yet pulled (the latest of each path),
	// sorted by path; changes the tree already holds are left out.
	Remote []datastore.Info
	// Conflicts are the paths in both.
	Conflicts []string
	// Changes counts the feed entries read.
	Changes int
}

// Status reports what is dirty locally and what changed remotely in scope,
// reading only the changes of the feed. It takes no lock and writes
// nothing.
func (t *Tree) Status(ctx context.Context, scope Scope) (Status, error) {
	var s Status
	models, err := validScope(scope)
	if err != nil {
		return s, err
	}
	st, err := t.loadState()
	if err != nil {
		return s, err
	}
	if s.Local, err = t.dirty(st, models, true); err != nil {
		return s, err
	}
	pl, err := t.plan(ctx, st, models, nil)
	if err != nil {
		return s, err
	}
	s.Changes = pl.read
	local := map[string]bool{}
	for _, c := range s.Local {
		local[c.Path] = true
	}
	for _, c := range pl.sorted() {
		if !needed(st, c) {
			continue
		}
		s.Remote = append(s.Remote, c)
		if local[c.Path] {
			s.Conflicts = append(s.Conflicts, c.Path)
		}
	}
	sort.Strings(s.Conflicts)
	return s, nil
}

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
	// Skipped are the paths a sync would leave unsynced now, with why and
	// the way out (a link, a file or directory in the way, a foreign
	// writer's entry the tree never pulls).
	Skipped []Skipped
	// Warnings are what the hints reading ignored.
	Warnings []string
}

// Status reports what is dirty locally and what changed remotely in scope,
// reading only the changes of the feed. It takes no lock and writes
// nothing.
func (t *Tree) Status(ctx context.Context, scope Scope) (s Status, err error) {
	models, err := validScope(scope)
	if err != nil {
		return s, err
	}
	st, err := t.loadState()
	if err != nil {
		return s, err
	}
	var sk skips
	defer func() { s.Skipped = sk.sorted() }()
	if s.Local, err = t.dirty(st, models, true, &sk, &s.Warnings); err != nil {
		return s, err
	}
	pl, err := t.plan(ctx, st, models, nil, &sk)
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
		if why, ok := st.Skipped[c.Path]; ok && c.Version == "" {
			sk.add(c.Path, why) // skipped by the last sync, retried by the next
			continue
		}
		if !c.Deleted && sk.entry(t.fs.canWrite(c.Path)) {
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

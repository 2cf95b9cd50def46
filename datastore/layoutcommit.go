package datastore

import (
	"context"
	"time"
)

// LayoutCommitter is implemented by drivers that commit whole
// (WholeCommitter) and whose commit can also require the layout record
// (LayoutKey) to still hold a value: DynamoDB's transaction carries a
// ConditionCheck on the record's item, at no extra request (a commit too
// big for one transaction reads the record first).
type LayoutCommitter interface {
	// CommitIfLayout is Commit, applied only if the record LayoutKey
	// holds layout when the commit applies; if it does not (another
	// value, or none), nothing is applied and the error matches
	// ErrStaleLayout.
	CommitIfLayout(ctx context.Context, fence *Fence, entries []Entry, now time.Time, layout []byte) ([]Info, error)
}

// The layout proved by the commit (issue 31). A Store opened with a
// remembered layout (OpenOptions.Remembered) that has not read the record
// yet (VerifyLayout) used to read it before its first commit: one request
// in every sync that commits. When the driver can make the commit
// conditional on the record (LayoutCommitter), the commit carries the
// check instead: a commit made with a layout the datastore no longer
// records is refused whole, with ErrStaleLayout, exactly as VerifyLayout would have refused it
// before the commit, and a commit that applies proves the layout it filed
// paths with was the datastore's at that instant (the record is written
// once and never changed by lake: checkLayoutWrite). Nothing the commit
// writes depends on a layout it did not prove. Any other commit reads the
// record first, as before.

// commitLayoutCheck returns the layout a commit must check in
// its own write, or nil when it needs none (the layout is known) or the
// driver cannot: then the layout is verified by a read first, and recorded
// if it never was (recordLayout).
func (s *Store) commitLayoutCheck(ctx context.Context) ([]byte, error) {
	root := s.root
	if root.layoutUnverified.Load() {
		if _, ok := s.d.(LayoutCommitter); ok && commitsWhole(s.d) {
			return []byte(root.layout.String()), nil
		}
		if err := s.VerifyLayout(ctx); err != nil {
			return nil, err
		}
	}
	return nil, s.recordLayout(ctx) // layout.go
}

// commitChecked commits entries with the driver's LayoutCommitter, and
// marks the layout verified (and recorded) once a commit applied with it.
func (s *Store) commitChecked(ctx context.Context, fence *Fence, entries []Entry, layout []byte) ([]Info, error) {
	applied, err := s.d.(LayoutCommitter).CommitIfLayout(ctx, fence, entries, s.now(), layout)
	if err != nil {
		return nil, err
	}
	s.root.layoutRecorded.Store(true)
	s.root.layoutUnverified.Store(false)
	return applied, nil
}

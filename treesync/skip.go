package treesync

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// Skipped is a path a sync left unsynced, and why: a remote entry the tree
// cannot apply (a path no valid client writes, an entry under the reserved
// .lake, a path that is a file on one side and a directory on the other) or
// a local file it cannot push (a symbolic link, a name the store refuses).
// Everything else syncs; one bad entry never wedges the tree.
type Skipped struct {
	// Path is the path skipped (as the store or the tree names it).
	Path string
	// Why says what is wrong and the way out.
	Why string
}

func (s Skipped) String() string { return fmt.Sprintf("skipped %s: %s", s.Path, s.Why) }

// skips collects the Skipped of one sync or status, once per path.
type skips struct {
	list []Skipped
	seen map[string]bool
}

func (s *skips) add(p, why string) {
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	if s.seen[p] {
		return
	}
	s.seen[p] = true
	s.list = append(s.list, Skipped{Path: p, Why: why})
}

// entry records err if it is about one path only (an *entryError) and
// reports whether it did; any other error is the caller's.
func (s *skips) entry(err error) bool {
	var ee *entryError
	if !errors.As(err, &ee) {
		return false
	}
	s.add(ee.path, ee.why)
	return true
}

// isEntryError reports whether err is about one path only (skips.entry
// would record it).
func isEntryError(err error) bool {
	var ee *entryError
	return errors.As(err, &ee)
}

func (s *skips) sorted() []Skipped {
	sort.Slice(s.list, func(i, j int) bool { return s.list[i].Path < s.list[j].Path })
	return s.list
}

// reservedSegment reports whether p has a segment that is the state
// directory's name in any letter case (a case-insensitive file system
// would write .LAKE/dirty into .lake/dirty).
func reservedSegment(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if strings.EqualFold(seg, StateDir) {
			return true
		}
	}
	return false
}

// checkRemotePath returns nil if the remote entry p of partition part is
// one the tree may write: a valid path of that partition, nothing under
// .lake. The store refuses such paths from lake's clients; only a foreign
// writer that bypassed it can have put them there.
func checkRemotePath(l datastore.Layout, p, part string) error {
	if reservedSegment(p) {
		return &entryError{path: p, why: fmt.Sprintf("is under the reserved %s (the tree's private state), written by a client that bypassed the store's checks; it is never pulled (delete it in the backend)", StateDir)}
	}
	if err := datastore.ValidatePath(p); err != nil {
		return &entryError{path: fmt.Sprintf("%q", p), why: fmt.Sprintf("is not a valid path (%v), written by a client that bypassed the store's checks; it is never pulled (delete it in the backend)", err)}
	}
	if l.Partition(p) != part {
		return &entryError{path: p, why: fmt.Sprintf("was listed in the feed of partition %s, not its own; it is not pulled (a foreign writer's entry)", part)}
	}
	return nil
}

// checkLocalPath returns nil if the local file p can be pushed.
func checkLocalPath(p string) error {
	if reservedSegment(p) {
		return &entryError{path: p, why: fmt.Sprintf("has a segment %s, which is reserved for the tree's state; the store refuses it (rename it)", StateDir)}
	}
	if err := datastore.ValidatePath(p); err != nil {
		return &entryError{path: fmt.Sprintf("%q", p), why: fmt.Sprintf("is not a path the store accepts (%v); rename it", err)}
	}
	return nil
}

// unreadable returns the *entryError of a remote entry the store will not
// give back whole, or nil: the one path is skipped (and retried by the
// next sync) while the rest syncs. Errors of the store as a whole (not
// found, unavailable, cancelled) stay the caller's. A file whose bytes do
// not match its size and SHA-256 (datastore.ErrDamaged) is one such entry:
// its local copy is left as it was.
func unreadable(p string, err error) error {
	switch {
	case errors.Is(err, metastore.ErrInvalidKey), errors.Is(err, metastore.ErrReservedKey):
		return &entryError{path: p, why: fmt.Sprintf("the store will not read it back (%v); it is not pulled", err)}
	case errors.Is(err, datastore.ErrDamaged):
		return &entryError{path: p, why: fmt.Sprintf("is damaged in the store (%v): its local copy is left as it was; run lake data check", err)}
	}
	return nil
}

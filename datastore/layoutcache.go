package datastore

import (
	"context"
	"errors"
	"fmt"

	"github.com/lakemeta/lake/internal/lakeerr"
	"github.com/lakemeta/lake/metastore"
)

// ErrStaleLayout is returned by VerifyLayout when the layout a Store was
// opened with (OpenOptions.Remembered) is not the one the datastore
// records now, or the datastore records none: it was recreated under the
// same URL. The caller forgets what it remembered and opens the datastore
// again with Open, which reads the record.
var ErrStaleLayout = errors.New("lake: the datastore's layout is not the one remembered")

// A remembered layout (issue 31). Every Open read the layout record: one
// request per process, the only one a sync that finds nothing changed
// needed besides the reads that prove it. A datastore is never given
// another layout in place (the record is written once, checkLayoutWrite),
// but one deleted and recreated under the same URL may record another, so
// a remembered copy cannot be trusted as it stands. It is trusted for
// nothing: a Store opened with OpenOptions.Remembered may serve only reads
// that compute no partition from a path (ChangedPartitions, Head of a named
// partition, Config, the catalog's changes), which are the reads that
// prove a sync has nothing to do; anything more (a pull, an upload, a
// commit) first calls VerifyLayout, which reads the record as Open would
// have. A sync that does more therefore costs what it cost before, and one
// that does nothing costs one request less. A commit on a Store whose
// layout was never verified still checks the record first (recordLayout),
// or, on a driver that can, in the commit's own write (layoutcommit.go).

// LayoutVerified reports whether s's layout is known to be the one its
// datastore records: always, unless s was opened with a remembered layout
// that VerifyLayout has not read yet.
func (s *Store) LayoutVerified() bool { return !s.root.layoutUnverified.Load() }

// VerifyLayout makes sure s's layout is the datastore's: with no request
// when it is known already (LayoutVerified), otherwise by one read of the
// record. A record naming another layout, or none, returns an error
// matching ErrStaleLayout, and s MUST then not be used for anything that
// computes partitions from paths: open the datastore again with Open.
func (s *Store) VerifyLayout(ctx context.Context) error {
	root := s.root
	if !root.layoutUnverified.Load() {
		return nil
	}
	v, err := root.Records().GetRecord(ctx, LayoutKey)
	if errors.Is(err, metastore.ErrNotFound) {
		return fmt.Errorf("%w (%s): it records none now", ErrStaleLayout, root.layout)
	}
	if err != nil {
		return lakeerr.Wrap(err, "read the datastore's layout")
	}
	got, err := ParseLayout(string(v))
	if err != nil {
		return err
	}
	if got != root.layout {
		return fmt.Errorf("%w (%s): it records %s", ErrStaleLayout, root.layout, got)
	}
	root.layoutRecorded.Store(true)
	root.layoutUnverified.Store(false)
	return nil
}

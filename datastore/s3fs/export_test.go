package s3fs

import (
	"context"
	"errors"
	"time"

	"github.com/lakemeta/lake/internal/offers"
	"github.com/lakemeta/lake/metastore"
)

// What the external tests reach inside the driver (they need
// internal/s3local, which imports this package).

// LogEntry is a change as a log object records it.
type LogEntry = logEntry

// RollEntries rolls entries, a log object's changes from position first,
// into the path index, as a roll-forward does.
func (d *Driver) RollEntries(ctx context.Context, first uint64, entries []LogEntry) error {
	now := time.Now()
	return d.updateIndexes(ctx, &logObject{First: first, Time: now, Entries: entries}, &tail{}, now)
}

// IndexEntry returns the position and version path's index entry holds.
func (d *Driver) IndexEntry(ctx context.Context, path string) (uint64, string, error) {
	e, _, err := d.readIndex(ctx, path)
	if err != nil || e == nil {
		return 0, "", err
	}
	return e.Pos, e.Version, nil
}

// HandedToReclaim reports whether version has its replaced marker.
func (d *Driver) HandedToReclaim(ctx context.Context, version string) (bool, error) {
	_, err := d.c.get(ctx, d.replacedKey(version))
	if errors.Is(err, metastore.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// WithoutRecent makes the drivers of d's client write heads without
// copies of their last objects (recent.go), as a lake before issue 31 did,
// so that readers read the log: for the tests of the log reads. Call it
// before the first commit.
func (d *Driver) WithoutRecent() { d.c.noRecent = true }

// SetOwnWriteAge makes the drivers of d's client take this process's own
// write of a lock record as a commit's check while it is younger than age
// (ownwrite.go; zero: never, every check reads the record), for the tests
// that count the check's reads or pass its age. Call it before the first
// write of the record.
func (d *Driver) SetOwnWriteAge(age time.Duration) { d.c.ownWrites = offers.New[[]byte](age) }

// OwnWriteAge is how long a process's own write of a lock record serves as
// a commit's check.
const OwnWriteAge = ownWriteAge

// RecentObjects and RecentBytes bound the copies of its last log objects
// a head carries (recent.go), for the tests that go past them.
const (
	RecentObjects = recentObjects
	RecentBytes   = recentBytes
)

// SetHeadIndexBounds sets how many entries, and how many bytes of them, a
// head holds before its index moves to f/ (headindex.go), until restore.
func SetHeadIndexBounds(files, bytes int) (restore func()) {
	f, b := headIndexMaxFiles, headIndexMaxBytes
	headIndexMaxFiles, headIndexMaxBytes = files, bytes
	return func() { headIndexMaxFiles, headIndexMaxBytes = f, b }
}

package datastore

import (
	"errors"
	"fmt"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// Info is the state of one path at its latest change: a version of a file,
// or a tombstone.
type Info struct {
	// Path is the file's path; Partition is Partition(Path).
	Path, Partition string
	// Pos is the position of the change that produced this state in its
	// partition's feed, assigned by the store.
	Pos uint64
	// Deleted marks a tombstone: the file was deleted at Pos.
	Deleted bool
	// Version names the immutable chunks of this version.
	Version string
	// Size is the file's length in bytes; Chunks its number of chunks.
	Size   int64
	Chunks int
	// SHA256 is the hex SHA-256 of the content.
	SHA256 string
	// Meta is the file's metadata, opaque to lake.
	Meta []byte
	// Inline is the content of a file stored inline (Chunks is 0 and
	// Size is len(Inline), at most InlineMax; see IsInline), read with
	// the metadata; nil for a file in chunks and for a tombstone.
	Inline []byte `json:",omitempty"`
	// Time is when the committing process wrote the change. It is for
	// people; ordering never depends on it.
	Time time.Time
}

// Staged is a file uploaded but not yet committed: its chunks are stored and
// invisible. Upload returns it; Commit makes it visible.
type Staged struct {
	Path    string
	Version string
	Size    int64
	Chunks  int
	SHA256  string
	Meta    []byte
	// Inline is the content of a file of at most InlineMax bytes, which
	// Upload stores in the commit's own write (no intent, no chunks:
	// Chunks is 0 and Version only names it); nil for a file in chunks.
	Inline []byte `json:",omitempty"`
	// Started is when the upload intent was recorded; Reclaim deletes the
	// chunks of an intent older than the grace period, after which Commit
	// refuses the upload with ErrUploadExpired.
	Started time.Time
}

// IsInline reports whether info is a live file whose content is in its
// metadata (Inline): no chunks, Size bytes in Inline. An empty file is
// inline (nothing to read). Files stored before inline storage existed
// have Chunks > 0 whenever Size > 0, so they never look inline.
func (info Info) IsInline() bool {
	return !info.Deleted && info.Chunks == 0
}

// Fence is the condition of a fenced commit: the lock record at Key holds
// exactly Token.
type Fence struct {
	Key   string
	Token []byte
}

// Entry is one change of a commit: a staged file, or the delete of Path.
type Entry struct {
	Put    *Staged
	Delete string
}

// Path is the path the entry changes.
func (e Entry) Path() string {
	if e.Put != nil {
		return e.Put.Path
	}
	return e.Delete
}

// Head is a partition's feed head: every change up to Seq is visible, and
// changes below Floor may have been purged.
type Head struct {
	Partition string
	Seq       uint64
	Floor     uint64
}

// ReclaimOptions shape Reclaim.
type ReclaimOptions struct {
	// Grace is how long a replaced version's chunks stay, for readers
	// that read its metadata before it was replaced; zero means
	// DefaultGrace.
	Grace time.Duration
	// UploadGrace is how long an upload may stay uncommitted before its
	// chunks are reclaimed (and its Commit refused); zero means Grace.
	UploadGrace time.Duration
	// Horizon is how long a tombstone stays in the feed; zero means
	// DefaultHorizon.
	Horizon time.Duration
}

// Defaults of ReclaimOptions.
const (
	// DefaultGrace outlives any sane read of one file and any upload that
	// is still going to commit.
	DefaultGrace = time.Hour
	// DefaultHorizon is how long a puller may stay away without a resync.
	DefaultHorizon = 7 * 24 * time.Hour
)

// ReclaimStats counts what Reclaim removed.
type ReclaimStats struct {
	Uploads    int // expired upload intents (their chunks deleted)
	Versions   int // replaced versions whose chunks were deleted
	Chunks     int // chunk items deleted
	Tombstones int // tombstones purged from the feed
	LiveKept   int // versions queued as replaced that their path still holds: kept, not deleted
}

// DropStats counts what DropPartition removed.
type DropStats struct {
	Files      int // live files (their versions handed to Reclaim)
	Tombstones int // tombstones
}

// ErrHorizon is returned by Changes for a position below the partition's
// floor: tombstones the puller has not seen may be gone, so it must resync
// the partition whole. It matches metastore.ErrCursorExpired.
var ErrHorizon = fmt.Errorf("%w: position is older than the tombstone horizon; resync the partition", metastore.ErrCursorExpired)

// ChunkReason is the reason of the conflict PutChunk returns for a chunk
// that already holds other bytes: chunks are written once (issue 26).
const ChunkReason = "the chunk exists with other bytes; chunks are immutable"

// ErrUploadExpired is returned by Commit for an upload whose intent was
// reclaimed (older than the grace period): upload it again. It matches
// metastore.ErrRefused.
var ErrUploadExpired = fmt.Errorf("%w: upload expired (reclaimed after the grace period); upload again", metastore.ErrRefused)

// IsFenceConflict reports whether err is a commit refused by its fence.
func IsFenceConflict(err error) bool {
	var ce *metastore.ConflictError
	return errors.As(err, &ce) && ce.Reason == FenceReason
}

// FenceReason is the ConflictError reason of a commit refused by its fence.
const FenceReason = "fence: the lock record does not hold the token"

package datastore

import (
	"context"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// Driver is what a datastore backend implements. The Store validates every
// argument before calling a Driver (paths, partitions, limits, sizes), so a
// Driver may assume them valid. Errors MUST match the metastore sentinels
// (and ErrHorizon, ErrUploadExpired) with errors.Is wherever one applies.
type Driver interface {
	// Name identifies the backend, for example "bolt" or "dynamodb".
	Name() string

	// MaxCommit is the most entries one atomic Commit accepts; the Store
	// splits larger commits into fenced chunks of at most this many, unless
	// the driver commits whole (WholeCommitter), when it is only the size
	// of the driver's one-write fast path.
	MaxCommit() int

	// BeginUpload records the upload intent of s (its version, path and
	// Started time) durably, before any of its chunks is written, so that
	// Reclaim finds the chunks of an upload that never commits.
	BeginUpload(ctx context.Context, s Staged) error

	// PutChunk stores chunk i of version. Chunks are written once (issue
	// 26): if the chunk exists, the same bytes succeed (a retry, perhaps
	// of a write that applied before a timeout) and other bytes MUST fail
	// with a metastore.ConflictError (reason ChunkReason) and change
	// nothing, so that a committed version's chunks never change. A driver
	// that can find the version's upload intent by version (bolt) refuses
	// a new chunk without a live one (ErrUploadExpired); the others leave
	// that to Commit, which proves every staged file against its chunks.
	PutChunk(ctx context.Context, version string, i int, data []byte) error

	// GetChunk returns chunk i of version, strongly consistent, or an error
	// matching metastore.ErrNotFound if it is gone (reclaimed). It need not
	// check the chunk's size (the Store does), but it MUST NOT read more
	// than ChunkSize+1 bytes of a stored chunk whatever its size.
	GetChunk(ctx context.Context, version string, i int) ([]byte, error)

	// Commit applies entries atomically (len(entries) <= MaxCommit(), paths
	// distinct): each staged file becomes its path's latest version, each
	// delete of a live path becomes a tombstone (a delete of an absent or
	// deleted path changes nothing), every change gets the next position
	// of its partition, every path's earlier change entry is replaced, the
	// partitions join the registry before their first change, and the
	// replaced versions are handed to Reclaim. If fence is not nil the
	// write applies only if the fence's record holds exactly its token at
	// that instant, else it returns a ConflictError with FenceReason. A
	// staged file whose intent was reclaimed fails with ErrUploadExpired.
	// It returns the changes applied, in entry order.
	Commit(ctx context.Context, fence *Fence, entries []Entry, now time.Time) ([]Info, error)

	// Stat returns the latest state of each path that has one (tombstones
	// included, with Deleted set), strongly consistent; absent paths are
	// missing from the map.
	Stat(ctx context.Context, paths []string) (map[string]Info, error)

	// List returns live files whose paths start with prefix, after the
	// driver's own position pos (nil: from the start), at most limit; next
	// is nil when the listing is complete. A page may be empty while next
	// is not.
	List(ctx context.Context, prefix string, limit int, pos []byte) (files []Info, next []byte, err error)

	// Head returns partition's feed head (zero for a partition without
	// changes), strongly consistent.
	Head(ctx context.Context, partition string) (Head, error)

	// Changes returns the latest change of each path of partition whose
	// position is in (after, upTo], in position order, at most limit, and
	// upTo: the position up to which the caller has now seen everything
	// (the head it read when fewer than limit changes remained, else the
	// last position returned). A change is returned only once every change
	// of its partition with a smaller position is visible. after below the
	// floor gives ErrHorizon; after beyond the head gives
	// metastore.ErrInvalidArgument.
	Changes(ctx context.Context, partition string, after uint64, limit int) (changes []Info, upTo uint64, err error)

	// Partitions returns every registered partition, sorted: each partition
	// that has had a change (and, on DynamoDB, any whose first commit was
	// refused after it registered).
	Partitions(ctx context.Context) ([]string, error)

	// ChangedPartitions returns the heads of the partitions that changed
	// after cursor (nil: every partition that ever changed) and the cursor
	// to pass next time. Its cost does not grow with the partitions that
	// did not change.
	ChangedPartitions(ctx context.Context, cursor []byte) (heads []Head, next []byte, err error)

	// Reclaim deletes the chunks of uploads older than the grace period
	// that never committed and of versions replaced longer ago than it, and
	// purges tombstones older than the horizon, raising their partitions'
	// floors.
	Reclaim(ctx context.Context, now time.Time, o ReclaimOptions) (ReclaimStats, error)

	// Namespace returns a driver over namespace name of the same backend,
	// sharing its resources (client, file): files, chunks, uploads, feeds,
	// heads, registry, index, garbage and tombstones of its own, none
	// shared with another namespace, so that namespaces never contend and
	// one namespace's size never costs another's reads. name is "" (the
	// root, which is the "default" namespace), a valid namespace
	// (ValidateNamespace) or an internal scope such as CatalogScope; it is
	// relative to the root, whatever namespace d is in. Records are NOT
	// scoped: every namespace's Records are the root's, so that a commit in
	// any namespace can be fenced on any lock record. Closing a namespace's
	// driver releases nothing; closing the root's releases everything.
	Namespace(name string) (Driver, error)

	// DropPartition removes everything partition holds, as if it had never
	// existed: its files (handing live versions' chunks to Reclaim as
	// replaced at now), tombstones, feed entries, head, index entry and
	// registry entry. Afterwards its paths are absent, its Head is zero,
	// Partitions and ChangedPartitions no longer name it, and a later
	// commit to it starts again at position 1. It is fenced like Commit
	// (checked in every atomic write it makes). It need not be one atomic
	// write: it removes the files and feed first and the registry entry
	// last, so a crash leaves it partly dropped (files gone, the partition
	// still registered) and calling it again finishes it. A dropped
	// partition that does not exist is no error.
	DropPartition(ctx context.Context, fence *Fence, partition string, now time.Time) (DropStats, error)

	Records

	// Close releases the backend's resources.
	Close() error
}

// Records is the small key-value surface of a datastore on which locks live
// (the lock package's storage), so that a commit can be fenced on a lock
// record in the same atomic write as its entries. Keys are metastore keys;
// values are compared as exact bytes.
type Records interface {
	// GetRecord returns the record's value or an error matching
	// metastore.ErrNotFound.
	GetRecord(ctx context.Context, key string) ([]byte, error)
	// CASRecord writes value if the record satisfies expect, else returns
	// an error matching metastore.ErrConflict.
	CASRecord(ctx context.Context, key string, expect metastore.Expect, value []byte) error
	// DeleteRecord deletes the record if it holds exactly expected, else
	// returns an error matching metastore.ErrConflict.
	DeleteRecord(ctx context.Context, key string, expected []byte) error
	// ListRecords returns the records whose keys start with prefix, sorted.
	// The prefix MUST name at least two whole segments ("rec/NS/"): a
	// DynamoDB driver keeps the records of each two-segment directory in
	// one item collection and reads exactly that one.
	ListRecords(ctx context.Context, prefix string) ([]metastore.Item, error)
	// FencedRecord writes value under key if the record satisfies expect,
	// only while fence.Key holds exactly fence.Token, in one atomic write;
	// otherwise nothing changes and the error matches
	// metastore.ErrConflict (a ConflictError with FenceReason when it was
	// the fence). fence.Key differs from key. It is the lock package's
	// fenced write (a renewal of an expiry record guarded on the lock
	// record).
	FencedRecord(ctx context.Context, fence Fence, key string, expect metastore.Expect, value []byte) error
}

// ServerClock is an optional ability of a Driver: its storage's own wall
// clock (S3's, estimated from the Date of its responses). The datastore's
// locks stamp their records and judge expiry by it (dslock), so that every
// host reads one clock instead of its own.
type ServerClock interface {
	// ServerNow returns the storage's clock now, as best known.
	ServerNow() time.Time
}

// HeadRememberer is the optional ability of a driver that keeps the
// partition heads its process read or wrote, and takes one from memory
// instead of reading it where a listing shows it unchanged (S3, issue 31:
// the Stat beside a sync's pull). RememberedHeads returns them as an
// opaque value for another process of the same client (a working tree
// keeps it in its state between syncs), which RememberHeads takes; a value
// it cannot use is ignored, and a remembered head is only ever used where
// the store proves it is the one listed.
type HeadRememberer interface {
	RememberedHeads() []byte
	RememberHeads(b []byte)
}

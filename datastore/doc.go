// Package datastore is the contract of lake's file-tree datastore: a
// path-addressable tree of whole files, each with opaque metadata, and a
// change feed per partition that a puller reads without ever reading what
// did not change.
//
// Users see one portable type, *Store; backends implement Driver and are
// opened into it (boltfs: the embedded default, in buckets of its own in the
// metastore's bolt file; dynamofs: the DynamoDB table TABLE_files). The
// conformance suite in package dstest runs against every driver.
//
// # Paths and partitions
//
// A path is a slash-separated UTF-8 name such as
// data/{type}/{id}/{name}/{version}/raw, the type of one segment or more.
// The partition of a path under data/ is its model, found from the path's
// end by the datastore's Layout (data/command/shell/u1/result/1/raw is in
// the model command/shell/u1; layout.go), which the datastore records so
// that every client agrees; any other path belongs to its first segment's
// partition (definitions/x is in partition "definitions"). Model partitions contain a
// "/" and the others do not, so the two never collide. Each partition has
// its own change feed, its own position counter and, on DynamoDB, its own
// item collection: one model's writes never touch another model's items.
//
// # Whole files
//
// A file is written in two phases. Upload stores its content in immutable
// chunks of ChunkSize bytes under a fresh version id, after recording an
// upload intent; nothing is visible yet. Commit then writes the metadata
// items of one or more files atomically, fenced by a lock record if given.
// A reader reads the metadata, then the chunks of the version it names, so it
// sees the old file or the new one, whole. Chunks are never changed; the
// chunks of a replaced version are reclaimed only after a grace period, and
// a reader that finds a chunk gone re-reads the metadata and returns the
// newer version whole. Chunks whose upload never committed are reclaimed
// after the same grace period (Reclaim).
//
// A file of at most InlineMax bytes skips the first phase: Upload keeps its
// content in the Staged file and Commit writes it inline, in the metadata
// record itself (Info.Inline), with no intent and no chunk, so that readers
// get it with the metadata they read (a pull, from the change feed). A live
// file with no chunks is inline; one with chunks holds nothing inline
// (Info.IsInline); files stored before inline storage existed read as they
// always did.
//
// # The change feed
//
// Every change (a new version, a delete) gets a position from its partition's
// counter, in the same atomic write as the change: positions come from the
// store, never from a writer's clock, and are dense per partition (1, 2, 3…).
// Changes(partition, after) returns the latest change of every path whose
// position is greater than after, in position order, and the position up to
// which the puller has then seen everything: a puller that has read up to P
// has missed nothing at or below P. Each path keeps only its latest change
// entry, replaced in the same atomic write. Deletes leave tombstones that
// pullers see; Reclaim purges tombstones older than the horizon and raises
// the partition's floor, and a puller whose position is below the floor gets
// ErrHorizon and must resync the partition whole (List it, then pull from
// the Head it read before listing).
//
// ChangedPartitions answers an unscoped pull: the partitions whose head moved
// past an opaque cursor, at a cost that does not grow with the partitions
// that did not change. Partitions lists every partition that ever had a
// change: a partition joins the registry before its first change.
//
// # Fenced commits
//
// A Fence names a lock record and the exact bytes it must hold (the lock
// package's fenced write guards on the lock record's exact bytes). A commit
// given a fence is refused with ErrConflict, changing nothing, unless the
// record holds those bytes at the instant of the commit, checked in the same
// atomic write. On a driver that commits whole (WholeCommitter: bolt,
// DynamoDB, S3, a node on any) a commit of any size is atomic. On another,
// a commit of more files than one atomic write holds (Driver.MaxCommit)
// goes in several fenced writes, each path whole, in order: a crash between
// them leaves the commit partly applied, and the next sync, which pushes
// what is still dirty, completes it.
//
// # Errors
//
// Errors are classified with errors.Is against the metastore sentinels
// (ErrNotFound, ErrConflict, ErrInvalidArgument, ErrUnavailable, …) plus
// ErrHorizon (which also matches metastore.ErrCursorExpired) and
// ErrUploadExpired (which also matches metastore.ErrRefused). Messages start
// with "lake: ".
package datastore

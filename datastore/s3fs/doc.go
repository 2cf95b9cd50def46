// Package s3fs is the datastore driver on S3 (store URL s3://BUCKET/PREFIX),
// and the lock package's Storage on the same bucket, so that the locks of a
// datastore on S3 live beside it and fence its commits.
//
// S3 writes one object at a time, conditionally (If-None-Match: *, If-Match:
// ETAG); every write this package sends is conditional. Under PREFIX/:
//
//	c/VERSION/NNNNNN     chunk NNNNNN of a version (immutable)
//	u/TIME/VERSION       the intent of an upload, written before its chunks, named by its start
//	v/VERSION            a replaced version's marker: an expired intent's version was committed
//	q/TIME/VERSION       the due queue: a version of a path replaced at TIME, whose chunks Reclaim deletes
//	                     after the grace period, once that path no longer holds it
//	                     (Reclaim lists u/ and q/ only up to now − grace)
//	l/PARTITION/POS      the partition's log: one object per commit, named by its first position
//	h/PARTITION          the partition's head: registry entry and applied watermark
//	f/PATH~              the path's index entry: its latest change, rolled forward from the log
//	k/PARTITION          compaction's mark: how far Reclaim has read the log (mark.go)
//	p/PARTITION/POS      a pending mark: a commit at POS not yet rolled forward
//	x/TIME/KEY           an object lake data check --repair moved aside
//	r/KEY~               a record of Records (lock records under r/lock/)
//	n/NAME/...           namespace NAME (and the internal scope _catalog):
//	                     its own c/ u/ v/ q/ l/ h/ f/ tree, no r/ (records are the root's)
//
// The root's tree is the default namespace; Namespace returns a driver
// over PREFIX/n/NAME/ on the same client, so two namespaces never read or
// write one object but the lock records they choose to share.
// DropPartition removes a partition's index entries, log objects and head,
// in that order, by conditional deletes; see drop.go and docs/s3.md.
//
// # Commits
//
// A commit is the conditional create of the partition's next log position;
// writers that read the same tail race for one name and exactly one wins, so
// positions come from the store and the log has neither gaps nor forks. The
// create is preceded by a pending mark (p/) and followed by the roll-forward
// into the index and the head; List, ChangedPartitions and Reclaim settle
// pending marks first, so a commit whose committer died after its create is
// seen by every reader (pending.go). Every retry is bounded; an object that
// is not lake's (a foreign writer's, a damaged one) is reported as
// datastore.ErrDamaged naming it, never raced for (check.go repairs it).
//
// A file and files below it in another partition are refused atomically by
// directory claims: log objects with no entries that a model's first
// commit creates in the partitions above it, and guards that a put over a
// claimed model creates in that model's log, each after checking the
// tail its create vouches for (claims.go, claimsonly.go). Like fence
// entries they take positions: S3's positions only grow, with gaps.
//
// # Fencing
//
// Each log object carries its fence's token and the highest token of each
// lock seen so far in the log, and a commit re-reads its lock record right
// before its create; a writer never writes after an object fenced by a
// newer holder. A new holder that broke another (lock.Lease.TookOver)
// appends a fence entry at the next position of every partition of its
// namespace before it reads (FencePartitions, via Store.FenceTakeover): a
// stale holder's late create then either lands before that entry, and the
// new holder reads it, or collides with it, re-reads the tail and is
// refused. A log token above what its lock record holds was written by no
// holder: damage, not a lost lock. The interleavings are listed in
// docs/s3.md ("What is fenced on S3").
package s3fs

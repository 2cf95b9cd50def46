// Package dynamostore is lake's Amazon DynamoDB backend, in two layouts.
//
// # Layout v1 (legacy)
//
// One table TABLE with HASH key "pk" (S), the logical key, and the value in
// the binary attribute "v". A point read is a strongly consistent GetItem. A
// prefix read is a Scan with a begins_with(pk, prefix) filter, paged through
// LastEvaluatedKey. DynamoDB applies Limit to the items it evaluates before
// the filter, so a prefix read pays for every item of the table: the cost of
// a catalog refresh grows with the retained append operations, manifests,
// leases and tombstones. v1 is kept faithful, as the baseline and the
// migration source. Page order is DynamoDB's scan (hash) order.
//
// # Layout v2 (prefix-isolated)
//
// A companion table TABLE_prefix_v2 with HASH key "bucket" (S), the family
// and shard of the key as package keyspace computes them, and RANGE key "pk"
// (S), the logical key. A point read computes one bucket and is a strongly
// consistent GetItem. A prefix read queries the family's shards one after
// another with bucket = :b AND begins_with(pk, :prefix), ConsistentRead, and a
// Limit of what remains of the page, so a request never evaluates an item of
// another family or outside the prefix. The cursor holds the family, the shard
// and the last key. Page order is shard by shard, key order within a shard.
//
// A prefix without "/" does not pin a family. It is served from the family
// registry, a control record to which every family is added (an atomic ADD to
// a string set) before its first write: the root family's shards and those of
// every registered family whose name starts with the prefix. It never scans.
//
// The shard counts and the hash format are frozen in a control record when
// the v2 table is created; Open compares them with the process's and refuses
// to open on a difference.
//
// # Writes
//
// Where a mutation changes one item and checks nothing else (a Put or CAS in
// state v1, in v2-only, or on a standalone v2 table), it is one conditional
// PutItem (single.go, through internal/ddb's Writer.PutOnce, the one copy of
// these rules that every DynamoDB user shares): one request, one write unit
// per KB. The item carries the token of the write that wrote it (attribute
// "w") and the request asks
// for the old item on a failed condition, which decides every retry: a
// failed condition on a first attempt (or after refusals that surely
// applied nothing) is a conflict; after an ambiguous attempt (a lost
// response), an old item carrying this write's token means the earlier
// attempt applied (success), and one without it means the outcome is
// unknown (ErrUnavailable), never a conflict, since the earlier attempt may
// have applied and been overwritten since. A retried Put is conditioned on
// the item carrying its own token, so it can only confirm its own write and
// never applies twice over a later writer's value.
//
// Every other write (Delete, GuardedMutate, every write in dual, backfill
// and v2-authoritative, the migrator's) is one TransactWriteItems with a
// ClientRequestToken that is fixed for the logical operation and reused by
// each retry. DynamoDB applies a token at most once (for ten minutes), so a
// retry after a lost response returns the first attempt's success instead
// of failing its own condition; should a retry still see a failed
// condition, the old item DynamoDB returns with the cancellation tells "my
// earlier attempt applied" from "someone else won". A retried DeleteItem
// would leave nothing to read back, which is why a delete stays a
// transaction. Transactions cost two write units per item.
//
// # Migration routing
//
// A store opened with LayoutAuto routes every operation by the durable
// migration record (state.go), re-read at most every Options.Refresh:
//
//   - Write modes (route.go). State v1 writes v1 alone. States dual and
//     backfill write v1 (the authority) and the v2 copy in one transaction;
//     the copy must be missing, equal to what v1 holds, or a leftover from
//     a rolled-back dual period, else the write fails closed with
//     ErrDiverged. v2-authoritative writes v2 (the authority) and mirrors
//     v1 unconditionally (or, once the v1 table is gone, writes v2 alone);
//     v2-only writes v2 alone. A forced layout (v1 or v2) refuses writes
//     that would bypass a migration in progress.
//   - Barrier. Every dual transaction checks that the key's write-barrier
//     item (keyspace.Barrier over the record's fixed count) is absent;
//     finalization installs every item, so a store that still caches dual
//     fails its check, re-reads the state and waits or re-routes.
//   - Change log (changelog.go). Every dual transaction also writes an
//     entry, keyed time first, in the v2 partition of its barrier shard, so
//     finalization re-verifies only the keys written since the verify.
//   - Stream (streams.go). Entering dual enables a stream on v1; verify
//     marks per shard the sequence number of its last record before its
//     scan; finalize reads every record since, following shard lineage,
//     so it sees writes lake did not make (legacy puts, updates and
//     deletes), and fails with ErrStreamGap where the stream cannot show
//     the whole interval (trimmed, disabled, replaced).
//   - Registry (registry.go). Long-running processes heartbeat an entry
//     into the node registry; the migrator gates its steps on the live
//     entries, and heartbeats prune entries dead for PruneAfterLeases
//     leases (see Registry).
//   - Repair (backfill.go, repass.go). Every write the migrator makes to
//     converge v2 to v1 is conditioned on both copies as read; v1 is never
//     written, and a v2 copy is removed only while v1 lacks the key.
//
// The contract is the Driver's. The migrator's primitives (transitions,
// backfill pages, verification pages, the change log, the stream) are on the handle
// Driver.Primitives returns, the node registry on Driver.Registry's: callers
// other than package migrate and a node's watcher need neither.
//
// # Cost
//
// Every data request asks for its consumed capacity; Driver.Stats returns
// requests by operation, items evaluated (ScannedCount), items returned and
// capacity units, so that cost claims are ratios anyone can reproduce.
package dynamostore

package s3fs

import (
	"context"

	"github.com/lakemeta/lake/datastore"
)

// Commits carried by another operation on S3 (issue 31): the catalog fold
// carried by the sync's commit (datastore.CommitFollower), and the removal
// of a dropped model's catalog row carried by the drop
// (datastore.CommitRider). A sync's fold commits the rows of the models
// its commit changed right after that commit, planned from what the commit
// applied (catalog.PlanFold); on its own it is a fenced commit like any
// other: a read of the lock record right before its create, the log
// object and the head. On DynamoDB the rows ride in the data commit's
// transaction. S3 has no transaction of two partitions, but the fold's
// commit needs no read of the lock record of its own: the data commit's,
// a moment before, is the check that fences both, as the carrying
// transaction's check is the rider's on DynamoDB. The same holds for a
// commit staged under a record (its flip checks the record right before)
// and for the lifecycle's removal of a dropped model's row after the drop
// (the drop checks it right before its removals).
//
// Why that check is enough. The fence entries order a stale holder's
// create against a takeover whenever the check that preceded it saw the
// holder's token, however long before (docs/s3.md, "What is fenced on
// S3"): the check preceded the new holder's lock write, which precedes its
// listing of the heads and the fence entry it appends to every partition
// of the namespace and to the namespace's partition of the catalog scope.
// The rows' create then either meets that fence entry at its position
// (refused: the tail read again names the newer token, and the fold runs
// as before, and is refused the same way) or lands before it, where the
// new holder's reads see it. A catalog partition with no head yet is
// registered after a read of the record of its own (register), as any
// first commit, since a takeover's listing could not have named it.
// What the shared check does not refuse is a rewrite of the record that
// is not a takeover (a forced release no one followed, a foreign write)
// landing between the data commit and the rows: the rows, which describe
// the data commit that stands, land as they would had the holder paused
// after its check; the next holder takes the lock over and fences.
//
// The rows are written after the data commit, not with it: a crash
// between them leaves the rows behind, as a crash between the commit and
// a fold of its own did, and the next fold brings them forward. The fold
// cursor's record, which rides in DynamoDB's transaction, is a PUT of its
// own here: a sync leaves it (RecordWrite.Optional) but every 16th, its
// tree keeping the cursor the fold moved to, so the record lags by a few
// syncs. A lagging record costs no row: a fold skips every model whose
// row already stands at its head's position (catalog.foldModels), so a
// fold from the record's older cursor (a tree without a cursor of its
// own, or whose guess the record refuses) finds the rows folded since and
// leaves them, having read the heads of the partitions changed since the
// record's cursor: a bounded few, since the record is written every few
// syncs. A rider whose commit fails
// is not carried and the caller folds as before; one whose object landed
// but no head holds it (unacknowledged) is rolled forward by that fold's
// commit, whose rows are the same.

// carryKey marks a context whose commit's fence was checked by the commit
// that carries it (follow).
type carryKey struct{}

// checkedByCarrier reports whether ctx's commit was fenced by the check
// of the commit carrying it: it makes no re-check of its own before its
// create.
func checkedByCarrier(ctx context.Context) bool { return ctx.Value(carryKey{}) != nil }

// follow commits the rider ctx's CommitFollower plans over applied, the
// result of d's commit fenced by fence, whose own check preceded it
// (carry).
func (d *Driver) follow(ctx context.Context, fence *datastore.Fence, applied []datastore.Info) {
	f := datastore.CommitFollowerOf(ctx)
	if f == nil || fence == nil || len(applied) == 0 {
		return
	}
	r := f.Follow(applied, func(pos []byte) ([]datastore.Head, []byte, bool) {
		return d.ChangedPartitionsOver(pos, applied)
	})
	if d.carry(ctx, fence, r) {
		f.MarkCarried(r)
	}
}

// carry commits rider r after an operation of d fenced by fence whose own
// check of the lock record preceded it (a commit, a drop), in the rider's
// store: its entries as one log object of one partition, with no check of
// the lock record of its own, then the rider's record unless it is
// optional. It reports whether
// r was carried, and does nothing where r cannot be carried that way: no
// rider, or one carried already, another fence or bucket, entries of more
// than one partition or more than one log object, a commit that fails.
func (d *Driver) carry(ctx context.Context, fence *datastore.Fence, r *datastore.CommitRider) bool {
	if !r.RidesWith(fence) {
		return false
	}
	rd, ok := datastore.UnwrapDriver(r.Driver).(*Driver)
	if !ok || rd.c != d.c || rd.prefix == d.prefix {
		return false
	}
	entries := r.Entries()
	if len(entries) == 0 || len(entries) > MaxCommit {
		return false
	}
	part := rd.partition(entries[0].Path())
	for _, e := range entries {
		if rd.checkPath(e.Path()) != nil || rd.partition(e.Path()) != part {
			return false
		}
	}
	out, err := rd.commitPartition(context.WithValue(ctx, carryKey{}, true), part, r.Fence, parseFence(r.Fence), entries, r.Now)
	if err != nil {
		return false
	}
	if w := r.Record; w != nil && !w.Optional && len(out) > 0 {
		// The rider's record (the fold cursor's) is a request of its own
		// here, where DynamoDB carries it in the same transaction: made
		// only when the caller asks (not Optional), after the rows, as
		// the fold's own cursor move is; a refusal (another fold moved
		// it) leaves it, as a fold from the record's cursor would.
		if err := rd.CASRecord(ctx, w.Key, w.Expect, w.Value); err == nil {
			w.MarkWritten()
		}
	}
	r.MarkCarried(out)
	return true
}

package s3fs

import (
	"bytes"
	"context"
	"time"

	"github.com/lakemeta/lake/datastore"
)

// A holder's own write of its lock record as its commit's check (issue 31).
//
// A fenced commit of one log object reads its lock record right before its
// create (commitPartitionTx), and a commit that registers a new partition
// before the head's create (register). The protocol asks two things of
// that check (docs/s3.md, "What is fenced on S3, and what is not"):
//
//   - that it precede any newer holder's write of the record and have
//     seen this holder's bytes: the newer holder fences the partitions
//     after its write, so the create meets its fence entry (refused) or
//     precedes it (the newer holder reads it). A newer holder's write can
//     only follow this process's own successful conditional write of the
//     record (the acquisition: it replaces what that write left), so the
//     acquisition is such a check as well as a GET is, however old;
//   - that a forced release, or a rewrite, of the record that no newer
//     holder followed refuse the holder's later commits. No check on S3
//     does that exactly (a release between the check and the create is
//     not seen); the GET narrows the gap to the request before the create.
//
// A sync acquires its lock and commits a moment later, with only its
// pull's reads between (a small file is stored inline, with no upload):
// the GET then re-reads what the acquisition wrote a few milliseconds
// before, one request in a sync of 9 (and one round trip in sequence,
// ~300 ms through a VPC endpoint in the seed). So a check takes this
// process's own write of the record instead, while it is younger than
// ownWriteAge and holds exactly the fence's bytes; anything older, or any
// other bytes, is read as before. What that gives up is written down: a
// forced release (or a rewrite) within ownWriteAge after the holder's
// acquisition does not refuse a commit sent in that second. Nothing is
// lost or hidden by it: a commit that lands after a forced release lands
// while no one holds the lock, and the next acquisition, which breaks a
// forced release's record, fences the partitions and reads it
// (lock.Lease.TookOver).
//
// The memory is cleared by every other write of the record in this
// process (a release, a failed compare-and-swap whose outcome is unknown)
// and kept per client, so every namespace's driver of the process shares
// it.

// ownWriteAge bounds how old this process's write of a lock record may be
// (counted from its request's sending) to serve as a commit's check: an acquisition,
// a pull's reads and the commit's own requests, well under a second even
// at the seed's ~300 ms a request; uploads of chunked files that take
// longer send the GET.
const ownWriteAge = time.Second

// wroteRecord remembers value as what this process last wrote at object
// key with a request sent at sent, or forgets what it wrote there when
// value is nil (a write whose outcome is not known, a delete). The age
// counts from the request's sending, not its answer: the write took
// effect in between, and an answer held back (a proxy, a paused process)
// must not make an old write look new.
func (d *Driver) wroteRecord(key string, value []byte, sent time.Time) {
	if value == nil {
		d.c.ownWrites.Drop(key)
		return
	}
	d.c.ownWrites.PutAt(key, bytes.Clone(value), sent)
}

// checkFenceOrOwnWrite is checkFence, answered without a request when this
// process wrote the fence's record less than ownWriteAge ago and it then
// held exactly the fence's bytes.
func (d *Driver) checkFenceOrOwnWrite(ctx context.Context, fence *datastore.Fence) (*fenceToken, error) {
	if fence != nil {
		if v, ok := d.c.ownWrites.Get(d.recordKey(fence.Key)); ok && bytes.Equal(v, fence.Token) {
			return parseFence(fence), nil
		}
	}
	return d.checkFence(ctx, fence)
}

package s3fs

import (
	"context"
	"fmt"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// Commits made visible by their head (datastore.LayoutModelsV5, issue 31).
//
// Before, the create of a commit's log object was the commit: a stat or a
// pull read the log after the head's watermark and saw it at once, and a
// commit first created a pending mark beside the head and deleted it after
// its roll-forward, so that the readers that look at the heads alone (List,
// ChangedPartitions) roll a commit forward whose committer died between
// its create and its head (pending.go). That is four writes a commit: the
// mark, the object, the head, the mark's delete.
//
// A datastore recorded "models-v5" makes a commit of one log object visible
// by its roll-forward instead: the create only takes the position (the race
// between writers, and the fence: a newer holder's fence entry takes the
// position or follows), and the commit is the conditional replace of the
// head that moves the watermark over it. Two writes: the object and the
// head. Readers read the head and no log object after its watermark that is
// not a staged part of a decided commit (whole.go): a stat, a pull
// (Changes, ChangesFromHead) and Head see the same commits as List and
// ChangedPartitions. A committer killed between its create and its head
// leaves an object no reader sees; the partition's next writer (its create
// at that position fails, and the tail it reads again holds the object),
// a newer holder's fence entry, or Reclaim rolls it forward, all of whose
// roll-forwards apply every object after the watermark in order. It was
// never acknowledged, so either outcome is one its caller allowed.
//
// A commit is acknowledged only once a head holds it: when its own
// roll-forward fails, it is reported as not known to have landed (a head
// that lost its condition is read again and the roll-forward made again,
// as before; another writer that rolled the object forward first counts).
//
// Fencing is as before: a fenced commit re-reads its lock record right
// before its create, and the create (at the position its tail names) meets
// a newer holder's fence entry or precedes it. The fence entries alone
// would order a stale holder's commit before the new holder's reads; the
// re-check is what refuses a commit under a token its lock record no
// longer holds when no new holder fenced the partition (a forced release,
// a record rewritten), which the datastore's contract asks of every
// backend (dstest's inline fence case), and what puts a head this commit
// created before a takeover, in the new holder's listing of the heads
// (TestHeadCommitNewPartitionRechecks).
//
// A staged commit (whole.go) keeps its pending marks and its parts are
// read after the watermark, as before, once its record is flipped; a part
// is created only where every object before it is in the head, so that an
// object not yet visible never stands before a part a reader reads (which
// would show one partition's part of the commit before its other's). The
// readers therefore take, after the watermark, the run of staged parts
// that follows it, and stop at the first object that is not one.

// visibleObjects returns the objects of t after its watermark that a
// reader reads: all of them in a datastore before models-v5, else the run
// of staged parts (decided: t holds none from an undecided one on) right
// after the watermark.
func (d *Driver) visibleObjects(t *tail) []*logObject {
	for i, o := range t.objects {
		if d.hiddenAfter(o, t.h.Applied) {
			return t.objects[:i]
		}
	}
	return t.objects
}

// readerSeq is the position up to which a reader of t sees the partition's
// changes (datastore.Head's Seq).
func (d *Driver) readerSeq(t *tail) uint64 {
	if !d.headCommits() {
		return t.headSeq()
	}
	if v := d.visibleObjects(t); len(v) > 0 {
		return v[len(v)-1].last()
	}
	return t.h.Applied
}

// hiddenAfter reports whether a reader of a models-v5 datastore stops at o,
// an object after the watermark applied: it is not a staged part, so no
// head holds it yet.
func (d *Driver) hiddenAfter(o *logObject, applied uint64) bool {
	return d.headCommits() && o.First > applied && o.Tx == ""
}

// needsRollBeforePart reports whether a staged part of a models-v5
// datastore must wait for t's objects after the watermark to be rolled
// forward: one of them is not a staged part.
func (d *Driver) needsRollBeforePart(t *tail) bool {
	return d.headCommits() && len(d.visibleObjects(t)) < len(t.objects)
}

// unacknowledged is the error of a models-v5 commit whose log object was
// created but whose roll-forward failed: no head holds it, so no reader
// sees it, until the partition's next writer (or Reclaim) rolls it forward.
func unacknowledged(part, key string, since time.Time, err error) error {
	return fmt.Errorf("%w: s3 commit to partition %q: its log object %s was created but no head holds it after %v (%v): readers do not see it until the partition's next commit or reclaim rolls it forward", metastore.ErrUnavailable, part, key, time.Since(since).Round(time.Millisecond), err)
}

// writerTailOf reads part's tail for a commit (readTail's withLast). A
// commit's first attempt in a models-v5 datastore whose head holds the
// fences of the object ending at its watermark lists no log: it takes the
// log to end at the watermark and creates at the position after it. That
// create is the check: positions follow each other from the watermark on,
// so the position being free proves nothing lies after the watermark, and
// one taken (an object no head holds yet, a commit in flight, a newer
// holder's fence entry, a staged part) makes the next attempt read the tail
// whole, as every attempt did before (issue 31: a LIST fewer in most
// commits).
func (d *Driver) writerTailOf(ctx context.Context, part string, first bool) (*tail, error) {
	if !first || !d.headCommits() {
		return d.readTail(ctx, part, true)
	}
	h, etag, ok, err := d.readHead(ctx, part)
	if err != nil {
		return nil, err
	}
	if !ok || !h.knownFences() {
		return d.tailOf(ctx, part, h, etag, ok, true)
	}
	// What a writer needs of the head alone (its fences), nothing after.
	return writerTail(&tail{h: h, hetag: etag, exists: true}), nil
}

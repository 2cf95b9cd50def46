package s3fs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// Commits of more than one log object (issue 30).
//
// A commit of at most MaxCommit entries of one partition is one log object,
// as before: its create is the commit. A larger one, or one across
// partitions, is staged under a commit record t/ID and made visible by one
// conditional write:
//
//  1. t/ID is created ({"state":"pending"}, If-None-Match);
//  2. each part (at most MaxCommit entries of one partition) is created as
//     its partition's next log object, exactly like a small commit's (its
//     pending mark first, the fence checked before it), carrying "tx":ID;
//     it is not rolled forward and its mark stays;
//  3. the flip: the fence checked once more, t/ID is replaced with
//     {"state":"done"} If-Match the ETag it was created with;
//  4. each partition is rolled forward and its marks deleted.
//
// Readers resolve a log object carrying tx through t/ID (one GET per commit
// met; decided states are cached): done, it counts; aborted, it holds its
// positions and no change; pending (or aborted), none of its changes is
// visible, and readers stop before it: a partition's tail, Stat and the
// roll-forward end at the position before it, and Changes returns upTo
// below it. A writer that finds another commit's undecided part at its
// partition's tail settles it: pending past the commit window, or fenced on
// a lock record that holds another token now (its flip can never pass the
// fence check), it is given up (t/ID replaced with aborted If-Match: exactly
// one of the flip and the abort wins); in flight, it is a conflict. The
// pending marks make List, ChangedPartitions and Reclaim settle it too, and
// roll a flipped commit forward. Commit records are kept: log objects name
// them for as long as they exist.

// txRecord is the value of t/ID. NB: a stored format.
type txRecord struct {
	State string    `json:"state"` // pending, done or aborted
	Time  time.Time `json:"time"`
	// FenceKey and FenceToken: the fence of a fenced commit.
	FenceKey   string `json:"fenceKey,omitempty"`
	FenceToken []byte `json:"fenceToken,omitempty"`
}

// pendingMark is a staged part's pending mark, deleted after the flip's
// roll-forward.
type pendingMark struct {
	part string
	pos  uint64
	etag string
	// hints are what the part's clash check read of the index, for the
	// roll-forward after the flip (indexHint: each write is conditional
	// on what was read, so a stale one costs a read, as without it).
	hints map[string]indexHint
	// tail and obj are the partition's tail as the part's create read it
	// and the part itself: after the flip, a partition of one part rolls
	// forward from them instead of reading its tail again (staleTail).
	tail *tail
	obj  *logObject
}

// errInFlight is settleTx's answer for a pending commit within its window.
var errInFlight = errors.New("lake: a commit is in flight")

func (d *Driver) txKey(id string) string { return d.prefix + "t/" + id }

// CommitsWhole implements datastore.WholeCommitter.
func (d *Driver) CommitsWhole() bool { return true }

// faultHook is the test hook of datastore.WriteFaulter.
type faultHook = datastore.WriteFault

// SetWriteFault implements datastore.WriteFaulter: f runs before each
// PutObject and DeleteObject.
func (d *Driver) SetWriteFault(f func() error) {
	d.c.fault.Set(f)
}

var (
	_ datastore.WholeCommitter = (*Driver)(nil)
	_ datastore.WriteFaulter   = (*Driver)(nil)
)

// readTx reads commit id's record; ok is false if it does not exist.
func (d *Driver) readTx(ctx context.Context, id string) (rec txRecord, o object, ok bool, err error) {
	if v, hit := d.c.txs.Load(d.txKey(id)); hit {
		return v.(txRecord), object{}, true, nil
	}
	o, err = d.c.get(ctx, d.txKey(id))
	if errors.Is(err, metastore.ErrNotFound) {
		return txRecord{}, object{}, false, nil
	}
	if err != nil {
		return txRecord{}, object{}, false, err
	}
	if err := json.Unmarshal(o.body, &rec); err != nil {
		return txRecord{}, object{}, false, datastore.Damaged(d.c.bucket+"/"+d.txKey(id), "not a commit record: %v", err)
	}
	if rec.State == "done" || rec.State == "aborted" {
		d.c.txs.Store(d.txKey(id), rec) // final
	}
	return rec, o, true, nil
}

// resolve reports whether o is a staged part of a commit not yet decided;
// a part of an aborted commit (or of a record that does not exist, which
// lake never leaves: the record is created before any part) is marked
// void.
func (d *Driver) resolve(ctx context.Context, o *logObject) (pending bool, err error) {
	if o.Tx == "" {
		return false, nil
	}
	if _, final := d.c.txs.Load(d.txKey(o.Tx)); !final {
		if _, own := d.c.staging.Load(o.Tx); own {
			return true, nil // not flipped yet: see client.staging
		}
	}
	rec, _, ok, err := d.readTx(ctx, o.Tx)
	if err != nil {
		return false, err
	}
	switch {
	case !ok || rec.State == "aborted":
		o.void = true
		return false, nil
	case rec.State == "done":
		return false, nil
	}
	return true, nil
}

// settleTx gives commit id up if it is pending and dead: older than the
// commit window by S3's clock or by the caller's (now, a writer's or
// Reclaim's), or fenced on a lock record that holds another token now.
// errInFlight if it is pending and alive. A caller whose clock runs ahead
// can only make a live commit fail (its flip loses to the abort), never
// apply a part of one.
func (d *Driver) settleTx(ctx context.Context, id string, now time.Time) error {
	rec, o, ok, err := d.readTx(ctx, id)
	if err != nil || !ok || rec.State != "pending" {
		return err
	}
	dead := d.c.clock.now().Sub(o.mod) > d.window || now.Sub(rec.Time) > d.window
	if !dead && rec.FenceKey != "" {
		v, err := d.GetRecord(ctx, rec.FenceKey)
		if err != nil && !errors.Is(err, metastore.ErrNotFound) {
			return err
		}
		dead = err != nil || !bytes.Equal(v, rec.FenceToken)
	}
	if !dead {
		return errInFlight
	}
	rec.State = "aborted"
	body, _ := json.Marshal(rec)
	if _, err := d.c.replace(ctx, d.txKey(id), o.etag, body); err != nil && !errors.Is(err, metastore.ErrConflict) {
		return err
	}
	return nil // aborted, or decided by another meanwhile
}

// maxNeedRounds bounds how often a staged commit is made again for a
// claim or guard it found it needs (claims.go): each round adds one that a
// model written meanwhile asks for.
const maxNeedRounds = 8

// commitWhole stages entries (order: their partitions, byPart: the entries
// of each) under a new commit record, flips it, and rolls it forward; cx
// are the claims and guards it carries in other partitions (claims.go),
// more added (and the commit made again under a new record) when a part
// finds it needs them; pre, with cx, the tails read when cx was found
// (errNeedParts), which its first attempt starts from.
func (d *Driver) commitWhole(ctx context.Context, fence *datastore.Fence, ft *fenceToken, entries []datastore.Entry, order []string, byPart map[string][]int, now time.Time, cx crossParts, pre map[string]*tail) ([]datastore.Info, error) {
	if cx == nil {
		cx = crossParts{}
		var err error
		if pre, err = d.neededParts(ctx, entries, order, byPart, cx); err != nil { // claims.go
			return nil, err
		}
	}
	for round := 1; ; round++ {
		out, err := d.commitWholeOnce(ctx, fence, ft, entries, order, byPart, now, cx, pre)
		pre = nil // read before the first attempt only
		var need *errNeedParts
		if !errors.As(err, &need) {
			return out, err
		}
		if round == maxNeedRounds {
			return nil, fmt.Errorf("%w: s3 commit: other models claimed its partitions %d times while it was made; nothing of it was applied", metastore.ErrUnavailable, round)
		}
		cx.merge(need.parts)
	}
}

// commitWholeOnce is one attempt of commitWhole under a new record.
func (d *Driver) commitWholeOnce(ctx context.Context, fence *datastore.Fence, ft *fenceToken, entries []datastore.Entry, order []string, byPart map[string][]int, now time.Time, cx crossParts, pre map[string]*tail) ([]datastore.Info, error) {
	started := time.Now()
	var b [16]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	rec := txRecord{State: "pending", Time: now.Round(0).UTC()}
	if fence != nil {
		rec.FenceKey, rec.FenceToken = fence.Key, fence.Token
	}
	body, _ := json.Marshal(rec)
	etag, err := d.c.create(ctx, d.txKey(id), body)
	if err != nil {
		return nil, err
	}
	d.c.staging.Store(id, true)
	defer d.c.staging.Delete(id)
	giveUp := func() {
		rec.State = "aborted"
		body, _ := json.Marshal(rec)
		_, _ = d.c.replace(ctx, d.txKey(id), etag, body) // best effort: readers give a dead commit up too
	}
	out := make([]datastore.Info, len(entries))
	applied := make([]bool, len(entries))
	var marks []pendingMark
	// Parts go in partition order, so that two commits staging the same
	// partitions never wait for each other in a cycle (each waits only
	// for one ahead of it in that order).
	// The partitions it claims or guards without entries go too.
	order = slices.Clone(order)
	for part := range cx {
		if !slices.Contains(order, part) {
			order = append(order, part)
		}
	}
	order = slices.Sorted(slices.Values(order))
	for _, part := range order {
		idx := byPart[part]
		if len(idx) == 0 {
			if _, err := d.commitPartitionTx(ctx, part, fence, ft, nil, now, id, &marks, cx, pre[part]); err != nil {
				giveUp()
				return nil, err
			}
			continue
		}
		for start := 0; start < len(idx); start += MaxCommit {
			chunk := idx[start:min(start+MaxCommit, len(idx))]
			sub := make([]datastore.Entry, len(chunk))
			for j, i := range chunk {
				sub[j] = entries[i]
			}
			partCx := cx
			if start > 0 {
				partCx = cx.without(part) // asked of the first object only
			}
			var known *tail
			if start == 0 {
				known = pre[part]
			}
			infos, err := d.commitPartitionTx(ctx, part, fence, ft, sub, now, id, &marks, partCx, known)
			if err != nil {
				giveUp()
				return nil, err
			}
			for _, info := range infos {
				for _, i := range chunk {
					if entries[i].Path() == info.Path {
						out[i], applied[i] = info, true
					}
				}
			}
		}
	}
	// The flip, under the fence, within the commit window (a commit that
	// took longer may have been given up by a reader, and its uploads are
	// closer to expiry than a commit expects).
	if time.Since(started) > d.window {
		giveUp()
		return nil, fmt.Errorf("%w: s3 commit %s took longer than the commit window %s; nothing of it was applied", metastore.ErrUnavailable, id, d.window)
	}
	if _, err := d.checkFenceOrOwnWrite(ctx, fence); err != nil { // ownwrite.go
		giveUp()
		return nil, err
	}
	rec.State = "done"
	body, _ = json.Marshal(rec)
	if _, err := d.c.replace(ctx, d.txKey(id), etag, body); err != nil {
		if errors.Is(err, metastore.ErrConflict) {
			// Given up by another writer: a newer holder's fence entry
			// met a part (its lock moved on), which is a fence
			// conflict; else it took longer than the commit window.
			if _, ferr := d.checkFence(ctx, fence); ferr != nil {
				return nil, ferr
			}
			return nil, metastore.Conflict(d.txKey(id), "another writer gave this commit up as dead (it took longer than the commit window); nothing of it was applied")
		}
		return nil, err
	}
	d.c.txs.Store(d.txKey(id), rec)
	// Visible; the roll-forward is left to readers' settling of the
	// marks, the next writer or Reclaim if it fails here. Each part's head
	// moved by its own first write, from the ETag its staging read, is
	// remembered for ChangedPartitionsOver (cursorover.go) when every
	// part's was.
	var moves []headMove
	whole := true
	for _, part := range order {
		t := staleTail(marks, part)
		own := slices.ContainsFunc(marks, func(m pendingMark) bool { return m.part == part })
		if t == nil && own {
			whole = false // more than one object there, or a tail that cannot be carried on
		}
		var hetag string
		if t != nil {
			hetag = t.hetag
		}
		if t == nil {
			var err error
			if t, err = d.readTail(ctx, part, false); err != nil || !t.exists {
				continue
			}
			for _, m := range marks {
				if m.part == part {
					for p, h := range m.hints {
						t.hint(p, h.e, h.etag)
					}
				}
			}
		}
		if d.rollForward(ctx, part, t, now) != nil {
			whole = false
			continue
		}
		for _, m := range marks {
			if m.part == part && m.pos <= t.rollTo() {
				d.clearPending(ctx, m.part, m.pos, m.etag)
			}
		}
		switch {
		case !own:
			// No object of this commit (a guard not made): its head
			// is not this commit's to move.
		case hetag != "" && t.rolled != "" && t.blocked == nil:
			moves = append(moves, headMove{part: part, from: hetag, to: t.rolled, created: t.created, claimsOnly: t.rolledHead.ClaimsOnly,
				head: datastore.Head{Partition: part, Seq: t.rolledHead.Applied, Floor: t.h.Floor}})
			if t.rolledHead.ClaimsOnly {
				// The claims host's head this commit wrote, with its
				// claim rolled in: the head a drop of the model reads
				// to forget that claim (claims.go's claimHosts).
				d.handOff(part, &tail{h: t.rolledHead, hetag: t.rolled, exists: true})
			}
		default:
			whole = false
		}
	}
	var res []datastore.Info
	for i, ok := range applied {
		if ok {
			res = append(res, out[i])
		}
	}
	if whole && len(moves) > 0 {
		d.c.moves.Record(d.prefix, res, moves) // cursorover.go
	}
	return res, nil
}

// staleTail returns the tail a committed (flipped) staged commit rolls
// part forward from without reading it again (issue 31: a GET of the
// head, a LIST and a GET of the log, per partition): the one its only part
// in part was created after, with that part appended. It is stale (other
// writers may have rolled the partition forward or committed after the
// part since), which the roll-forward allows: every index entry moves only
// up by a conditional write, and the head's watermark is written If-Match
// the ETag read, re-read when it moved, and only ever raised. nil when part
// holds several parts of the commit, or the tail held another commit's
// undecided part: the caller reads the tail.
func staleTail(marks []pendingMark, part string) *tail {
	var found *pendingMark
	for i := range marks {
		if marks[i].part != part {
			continue
		}
		if found != nil {
			return nil
		}
		found = &marks[i]
	}
	if found == nil || found.tail == nil || found.obj == nil || found.tail.blocked != nil || !found.tail.exists {
		return nil
	}
	t := found.tail
	t.objects = append(t.objects, found.obj)
	t.last = found.obj
	return t
}

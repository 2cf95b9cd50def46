package s3fs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
	"golang.org/x/sync/errgroup"
)

// Commit implements datastore.Driver. A commit of at most MaxCommit
// entries of one partition becomes one log object, created with
// If-None-Match at the partition's next position: that create is the
// commit. A larger one, or one across partitions, is staged as one log
// object per part under a commit record that one conditional replace flips
// (whole.go), so it is atomic too. The fence is checked before each object:
// the lock record must hold the fence's bytes, and no earlier object of the
// log may carry a higher token of the same lock.
func (d *Driver) Commit(ctx context.Context, fence *datastore.Fence, entries []datastore.Entry, now time.Time) ([]datastore.Info, error) {
	for _, e := range entries {
		if err := d.checkPath(e.Path()); err != nil {
			return nil, err
		}
	}
	var order []string
	byPart := map[string][]int{}
	for i, e := range entries {
		p := d.partition(e.Path())
		if _, ok := byPart[p]; !ok {
			order = append(order, p)
		}
		byPart[p] = append(byPart[p], i)
	}
	whole := len(order) > 1 || len(entries) > MaxCommit
	// The check that counts is the one right before each log object's
	// create (commitPartition); a commit of one log object makes no other
	// (issue 31: it read the lock record twice, one GET more per commit).
	// A commit that changes nothing still answers for its fence, here or,
	// for deletes of absent paths, in commitPartition; a staged commit
	// checks here too, before it writes its record.
	ft := parseFence(fence)
	if len(entries) == 0 || whole {
		var err error
		if ft, err = d.checkFenceOrOwnWrite(ctx, fence); err != nil {
			return nil, err
		}
	}
	// Refuse an expired upload before anything is written. An inline
	// file has no intent: its log entry is all of it.
	for _, e := range entries {
		if e.Put == nil || e.Put.Chunks == 0 {
			continue
		}
		if _, err := d.c.head(ctx, d.uploadKey(e.Put.Version, e.Put.Started)); err != nil {
			if errors.Is(err, metastore.ErrNotFound) {
				return nil, fmt.Errorf("%w: %q version %s", datastore.ErrUploadExpired, e.Put.Path, e.Put.Version)
			}
			return nil, err
		}
	}
	if whole {
		// More than one log object: staged under a commit record that
		// one conditional write flips (whole.go).
		out, err := d.commitWhole(ctx, fence, ft, entries, order, byPart, now, nil, nil)
		if err == nil {
			d.follow(ctx, fence, out) // its flip checked the fence right before (follow.go)
		}
		return out, err
	}
	out := make([]datastore.Info, len(entries))
	applied := make([]bool, len(entries))
	for _, part := range order {
		idx := byPart[part]
		sub := make([]datastore.Entry, len(idx))
		for j, i := range idx {
			sub[j] = entries[i]
		}
		infos, err := d.commitPartition(ctx, part, fence, ft, sub, now)
		var need *errNeedParts
		if errors.As(err, &need) {
			// A claim or guard in another partition (claims.go): the
			// commit is staged, with them. Its record is written after
			// a check of the fence, unless the try just made checked it
			// before creating its partition's head, a few requests ago
			// (issue 31: a model's first commit read the lock record
			// twice before its record): nothing staged is seen before
			// the flip, which checks it again right before.
			if t := need.tails[part]; t == nil || !t.created {
				if ft, err = d.checkFenceOrOwnWrite(ctx, fence); err != nil {
					return nil, err
				}
			}
			res, err := d.commitWhole(ctx, fence, ft, entries, order, byPart, now, need.parts, need.tails)
			if err == nil {
				d.follow(ctx, fence, res) // as above
			}
			return res, err
		}
		if err != nil {
			return nil, err
		}
		for _, info := range infos {
			for _, i := range idx {
				if entries[i].Path() == info.Path {
					out[i], applied[i] = info, true
				}
			}
		}
	}
	var res []datastore.Info
	for i, ok := range applied {
		if ok {
			res = append(res, out[i])
		}
	}
	d.follow(ctx, fence, res) // follow.go
	return res, nil
}

// AppendFence appends a fence entry for fence to the log of each partition
// (registering a partition that has no head yet): a new holder of a lock
// calls it before it reads what it will write, so that from then on no
// commit under an older token of the same lock lands in those logs (the S3
// counterpart of a fenced write; see the package documentation). Each
// fence entry takes one position.
func (d *Driver) AppendFence(ctx context.Context, fence datastore.Fence, partitions []string) error {
	return d.appendFence(ctx, fence, partitions, true)
}

// FencePartitions implements datastore.Fencer: AppendFence to each of
// partitions that has a head, and to each partition that holds only
// directory claims (Partitions does not name those, but a stale holder's
// first file there must be fenced as anywhere else: claimsonly.go).
func (d *Driver) FencePartitions(ctx context.Context, fence datastore.Fence, partitions []string) error {
	extra, err := d.claimsOnlyPartitions(ctx)
	if err != nil {
		return err
	}
	for _, p := range extra {
		if !slices.Contains(partitions, p) {
			partitions = append(partitions, p)
		}
	}
	return d.appendFence(ctx, fence, partitions, false)
}

var _ datastore.Fencer = (*Driver)(nil)

// fenceParallel bounds the partitions fenced at once: a takeover fences
// every partition of its namespace, a few requests each, and S3 answers
// requests in parallel far better than one after another.
const fenceParallel = 8

func (d *Driver) appendFence(ctx context.Context, fence datastore.Fence, partitions []string, register bool) error {
	for _, part := range partitions {
		if err := datastore.ValidatePartition(part); err != nil {
			return err
		}
	}
	ft, err := d.checkFenceOrOwnWrite(ctx, &fence) // a new holder's own acquisition (ownwrite.go)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(fenceParallel)
	for _, part := range partitions {
		g.Go(func() error {
			if !register {
				if _, _, ok, err := d.readHead(gctx, part); err != nil || !ok {
					return err
				}
			}
			_, err := d.commitPartition(gctx, part, &fence, ft, nil, time.Now())
			return err
		})
	}
	return g.Wait()
}

// checkFence reads the fence's lock record: it must hold exactly the
// fence's bytes. It returns the fence as logged (the token parsed from a
// lock record's JSON; zero for other bytes, which order nothing).
func (d *Driver) checkFence(ctx context.Context, fence *datastore.Fence) (*fenceToken, error) {
	if fence == nil {
		return nil, nil
	}
	o, err := d.c.get(ctx, d.recordKey(fence.Key))
	if errors.Is(err, metastore.ErrNotFound) || (err == nil && !bytes.Equal(o.body, fence.Token)) {
		return nil, metastore.Conflict(fence.Key, datastore.FenceReason)
	}
	if err != nil {
		return nil, err
	}
	return parseFence(fence), nil
}

// parseFence returns fence as logged: the token parsed from a lock
// record's JSON; zero for other bytes, which order nothing.
func parseFence(fence *datastore.Fence) *fenceToken {
	if fence == nil {
		return nil
	}
	var rec struct {
		Token uint64 `json:"token"`
	}
	_ = json.Unmarshal(fence.Token, &rec) // opaque bytes carry no token
	return &fenceToken{Key: fence.Key, Token: rec.Token}
}

// maxCommitAttempts bounds how many times a commit reads a partition's tail
// and races for its next position: other writers winning that many times in
// a row under one lock means something is wrong, and the committer must
// not hold the lock while it spins.
const maxCommitAttempts = 32

// commitPatience is how long a commit keeps racing after maxCommitAttempts:
// on a busy machine a handful of writers of one partition can each lose
// dozens of races in a row, and giving up then turns plain contention into
// an error; only a race lost for this long is reported.
const commitPatience = 20 * time.Second

// commitPartition creates the next log object of part holding entries (no
// entries: a fence entry), retrying while other writers win the position,
// at most maxCommitAttempts times. A position lost to an object that the
// re-read tail does not show (a foreign or damaged object) is reported as
// damage at once.
func (d *Driver) commitPartition(ctx context.Context, part string, fence *datastore.Fence, ft *fenceToken, entries []datastore.Entry, now time.Time) ([]datastore.Info, error) {
	return d.commitPartitionTx(ctx, part, fence, ft, entries, now, "", nil, nil, nil)
}

// commitPartitionTx is commitPartition; with tx set, the log object is a
// staged part of commit tx (whole.go): it is not rolled forward, and its
// pending mark, left in place, is appended to marks. cx are the staged
// commit's claims and guards (claims.go; nil for a commit of one object):
// what they ask of part is checked against the tail the create vouches
// for, and a claim or guard the commit needs and cx lacks is returned as
// *errNeedParts. pre, if not nil, is part's tail as the staged commit read
// it before it began: the first attempt starts from it (its create is
// conditional on the position it names, so a tail that moved since only
// costs a lost race and a new read).
func (d *Driver) commitPartitionTx(ctx context.Context, part string, fence *datastore.Fence, ft *fenceToken, entries []datastore.Entry, now time.Time, tx string, marks *[]pendingMark, cx crossParts, pre *tail) ([]datastore.Info, error) {
	var lost uint64 // the position last lost to another create
	inFlight := false
	begin := time.Now()
	if tx != "" {
		// A staged part moves the tail a Stat may have handed to the
		// next commit (handoff.go): that commit reads afresh.
		d.c.handoff.Drop(d.prefix + part)
	}
	req := cx[part]
	guardOnly := len(entries) == 0 && req != nil && len(req.claims) == 0
	if req != nil {
		req.skipped = false
	}
	for attempt := 0; attempt < maxCommitAttempts || time.Since(begin) < commitPatience; attempt++ {
		started := time.Now()
		regFence := fence
		if tx != "" {
			regFence = nil // a staged commit checked its fence before its record
		}
		if guardOnly {
			// A model with no log holds no file to guard; its next
			// commit claims again (claims.go).
			t, err := d.readTail(ctx, part, true)
			if err != nil {
				return nil, err
			}
			if emptyLog(t) {
				req.skipped = true
				return nil, nil
			}
		}
		var known *tail
		if attempt == 0 {
			known = pre // read by the staged commit before it began (claims.go)
			if known == nil && tx == "" {
				// read by this process's Stat a moment ago (handoff.go)
				var err error
				if known, err = d.takeHandoff(ctx, part); err != nil {
					return nil, err
				}
			}
		}
		t, err := d.register(ctx, part, regFence, len(entries) == 0 && req != nil && len(req.claims) > 0, known, attempt == 0)
		if err != nil {
			return nil, err
		}
		if tx != "" && d.needsRollBeforePart(t) {
			// A staged part follows only objects a head holds
			// (headcommit.go): roll the others forward first.
			if err := d.rollForward(ctx, part, t, now); err != nil && !errors.Is(err, errHeadGone) {
				return nil, err
			}
			continue
		}
		if t.blocked != nil && t.blocked.Tx != tx {
			// Another commit's staged part, not yet decided: nothing
			// may follow it until it is (whole.go). Wait for it a
			// while, as for a lost position.
			err := d.settleTx(ctx, t.blocked.Tx, now)
			if err != nil && !errors.Is(err, errInFlight) {
				return nil, err
			}
			if inFlight = err != nil; inFlight {
				if berr := backoff(ctx, attempt); berr != nil {
					return nil, berr
				}
			}
			continue
		}
		if lost != 0 && t.next() <= lost {
			// The create lost to an object the tail does not read:
			// racing for the position again would never end.
			return nil, datastore.Damaged(d.c.bucket+"/"+d.logKey(part, lost), "an object holds partition %q's next position but is not read as its log object", part)
		}
		tails, fresh, err := d.checkClash(ctx, t, part, entries, cx.coveredFor(part)) // clash.go
		if err != nil {
			return nil, err
		}
		if err := d.checkReq(ctx, t, part, req); err != nil { // claims.go
			return nil, err
		}
		if err := d.crossNeeds(ctx, t, part, fresh, tails, cx); err != nil {
			var need *errNeedParts
			if errors.As(err, &need) && tx == "" {
				need.tails = maps.Clone(tails)
				need.tails[part] = t
			}
			return nil, err
		}
		obj := &logObject{First: t.next(), Time: now.Round(0).UTC(), Fence: ft, Fences: map[string]uint64{}, Tx: tx}
		if req != nil {
			obj.Claims = req.claims
		}
		if t.last != nil {
			maps.Copy(obj.Fences, t.last.Fences)
		}
		if ft != nil && ft.Token != 0 {
			if obj.Fences[ft.Key] > ft.Token {
				if err := d.newerFence(ctx, fence); err != nil {
					return nil, err
				}
			}
			obj.Fences[ft.Key] = ft.Token // a forged higher value is not carried on
		}
		if len(obj.Fences) == 0 {
			obj.Fences = nil
		}
		for _, e := range entries {
			if e.Put != nil {
				p := e.Put
				obj.Entries = append(obj.Entries, logEntry{Path: p.Path, Version: p.Version, Size: p.Size, Chunks: p.Chunks, SHA256: p.SHA256, Meta: p.Meta, Inline: p.Inline})
			}
		}
		var deletes []string
		for _, e := range entries {
			if e.Put == nil {
				deletes = append(deletes, e.Delete)
			}
		}
		if len(deletes) > 0 {
			cur, err := d.statTail(ctx, t, deletes)
			if err != nil {
				return nil, err
			}
			for _, p := range deletes {
				if c, ok := cur[p]; ok && !c.Deleted {
					obj.Entries = append(obj.Entries, logEntry{Path: p, Deleted: true})
				}
			}
		}
		if len(entries) > 0 && len(obj.Entries) == 0 {
			// Only deletes of absent paths: nothing changes, but the
			// commit still answers for its fence.
			if _, err := d.checkFence(ctx, fence); err != nil {
				return nil, err
			}
			return nil, nil
		}
		// Keep entry order: puts were appended before deletes above.
		obj.Entries = inEntryOrder(entries, obj.Entries)
		if fence != nil && len(entries) > 0 && tx == "" && !checkedByCarrier(ctx) {
			// Re-check the lock record right before the create (and its
			// pending mark), so that the window in which a takeover can
			// pass unseen is two requests wide; the new holder's fence
			// entries close it
			// (FencePartitions): a takeover inside the window is
			// followed by a fence entry at this very position (our
			// create fails, and the re-read tail names the newer token)
			// or at a later one (our commit landed first, and the new
			// holder reads it). A fence entry needs no re-check: a
			// stale one changes nothing a reader sees. Nor does a
			// staged part (issue 31): nothing of it is seen before the
			// flip, which checks the record right before it; a newer
			// holder's fence entry after the part gives its commit up
			// (whole.go), and one before it refuses it at the tail.
			// Nor does a commit another carries (follow.go): the
			// carrier's check, a moment before, fences it. This
			// process's own acquisition a moment before is the
			// check too (ownwrite.go).
			if _, err := d.checkFenceOrOwnWrite(ctx, fence); err != nil {
				return nil, err
			}
		}
		if time.Since(started) > d.window {
			continue // too slow: the tail may be gone; read it again
		}
		var mark string // the pending marker's ETag (see pending.go)
		if len(entries) > 0 && (tx != "" || !d.headCommits()) {
			// A models-v5 commit of one object needs no mark: no
			// reader sees it before its head does (headcommit.go).
			if mark, err = d.markPending(ctx, part, obj.First); err != nil {
				return nil, err
			}
		}
		body, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("lake: encode log object: %v", err)
		}
		etag, err := d.c.create(ctx, d.logKey(part, obj.First), body)
		if errors.Is(err, metastore.ErrConflict) {
			lost = obj.First
			// A lost position means another commit landed: the log
			// moved on and nothing needs to cool down. A growing
			// backoff here would only hand the next positions to the
			// writers that just won (they go again at once) and starve
			// this one; a short jitter keeps the races fair.
			if berr := backoff(ctx, min(attempt, 1)); berr != nil {
				return nil, berr
			}
			continue // another writer took the position
		}
		if err != nil {
			return nil, err
		}
		if tx != "" {
			// A staged part: visible once its commit is flipped, rolled
			// forward then, its mark kept until it is.
			*marks = append(*marks, pendingMark{part: part, pos: obj.First, etag: mark, hints: t.hints, tail: t, obj: obj})
			return obj.infos(part), nil
		}
		t.objects = append(t.objects, obj)
		t.last = obj
		// Before models-v5 the create is the commit: it is durable and
		// visible (a stat or pull reads the log after the watermark). A
		// failed roll-forward is left to the readers that settle the
		// pending marker (List, ChangedPartitions), the next writer of
		// the partition or Reclaim rather than reported as a failed
		// commit, which a caller would retry into a second version. In
		// models-v5 the roll-forward is the commit (headcommit.go).
		hetag := t.hetag
		switch err := d.rollForward(ctx, part, t, now); {
		case errors.Is(err, errHeadGone):
			d.reregister(ctx, part, obj, etag, now)
		case err != nil && d.headCommits():
			// The head is the commit (headcommit.go): none holds
			// this one, so it is not acknowledged.
			return nil, unacknowledged(part, d.logKey(part, obj.First), started, err)
		case err == nil:
			d.clearPending(ctx, part, obj.First, mark)
			if t.rolled != "" && t.blocked == nil {
				d.c.moves.Record(d.prefix, obj.infos(part), []headMove{{part: part, from: hetag, to: t.rolled, created: t.created,
					head: datastore.Head{Partition: part, Seq: obj.last(), Floor: t.h.Floor}}}) // cursorover.go
				// The head this commit wrote, for the partition's next
				// commit in this process (handoff.go).
				d.handOff(part, &tail{h: t.rolledHead, hetag: t.rolled, exists: true, hints: t.wrote})
			}
		}
		return obj.infos(part), nil
	}
	if inFlight {
		return nil, metastore.Conflict(part, fmt.Sprintf("a commit in flight held a staged part of this partition's log through %v", time.Since(begin).Round(time.Second)))
	}
	return nil, fmt.Errorf("%w: s3 commit to partition %q gave up after %v: other writers took its next position every time (last %s); nothing of this commit was written", metastore.ErrUnavailable, part, time.Since(begin).Round(time.Second), d.logKey(part, lost))
}

// newerFence explains a log whose last object names a token of the fence's
// lock above the committer's: a fence conflict if the lock record moved on
// (a newer holder fenced the log), else nil. The record holding the
// committer's exact bytes means no newer token was ever issued (tokens
// only grow), so the log's value was written by no holder of the lock (a
// forged or damaged fence): the commit goes on, naming its own token, and
// readers ignore the forged value (fenceWalk); lake data check reports the
// object that carries it and --repair lowers it.
func (d *Driver) newerFence(ctx context.Context, fence *datastore.Fence) error {
	_, err := d.checkFence(ctx, fence)
	return err
}

func inEntryOrder(entries []datastore.Entry, got []logEntry) []logEntry {
	byPath := make(map[string]logEntry, len(got))
	for _, g := range got {
		byPath[g.Path] = g
	}
	out := got[:0:0]
	for _, e := range entries {
		if g, ok := byPath[e.Path()]; ok {
			out = append(out, g)
		}
	}
	return out
}

// register reads part's tail, creating its head (the registry entry) first
// if the partition is new; with a fence, only once the lock record holds
// it (so a stale holder registers no partition).
func (d *Driver) register(ctx context.Context, part string, fence *datastore.Fence, claimsOnly bool, known *tail, first bool) (*tail, error) {
	t := writerTail(known)
	if t == nil {
		var err error
		if t, err = d.writerTailOf(ctx, part, first); err != nil {
			return nil, err
		}
	}
	if t.exists {
		return t, nil
	}
	if _, err := d.checkFenceOrOwnWrite(ctx, fence); err != nil { // ownwrite.go
		return nil, err
	}
	h := head{ClaimsOnly: claimsOnly, Indexed: d.headIndexes()}
	body, _ := json.Marshal(h)
	etag, err := d.c.create(ctx, d.headKey(part), body)
	if err == nil {
		d.c.known.put(d.headKey(part), etag, body) // knownheads.go
		if d.headCommits() {
			// As a first attempt from a head that holds its fences
			// (writerTailOf): the create at position 1 is the check
			// that the log is empty. One taken (an object a dropped
			// partition's drop has not deleted yet) makes the next
			// attempt read the tail whole (issue 31: a LIST fewer for
			// each new partition).
			return &tail{h: h, hetag: etag, exists: true, withLast: true, created: true}, nil
		}
		// The head is the one just created: only the log is read (a
		// dropped partition's may still hold objects).
		t, err := d.tailAt(ctx, part, h, etag, true)
		if t != nil {
			t.created = true
		}
		return t, err
	}
	if !errors.Is(err, metastore.ErrConflict) {
		return nil, err
	}
	return d.readTail(ctx, part, true)
}

// writerTail returns t as a writer's tail (readTail's withLast), or nil if
// that takes another read: a reader's tail (a clash check's of another
// partition) has all a writer needs when the head holds the fences of the
// object ending at its watermark (headBase: what tailAt would take), or
// when the partition has no head.
func writerTail(t *tail) *tail {
	switch {
	case t == nil || t.withLast:
		return t
	case t.exists && !t.h.knownFences():
		return nil
	}
	w := *t
	w.withLast = true
	if w.exists {
		w.base = headBase(w.h)
		if w.last == nil {
			w.last = w.base
		}
	}
	return &w
}

// reregister settles a commit whose log object (obj, created with etag)
// landed while the partition was being dropped: its head was deleted under
// the commit's roll-forward. Left as it is, the commit would be an orphan
// (index entries listed, its paths not found by a stat). If its log object
// survived, the partition is registered again and the commit is whole, as
// if made after the drop (a drop still running removes it in its next
// pass); if the drop removed it, so are the index entries the commit wrote
// after the drop looked (its live versions handed to Reclaim). Failures
// are left like a failed roll-forward's: the next drop of the partition
// removes what is left.
func (d *Driver) reregister(ctx context.Context, part string, obj *logObject, etag string, now time.Time) {
	o, err := d.c.head(ctx, d.logKey(part, obj.First))
	if err == nil && o.etag == etag {
		body, _ := json.Marshal(head{Indexed: d.headIndexes()})
		if _, err := d.c.create(ctx, d.headKey(part), body); err != nil && !errors.Is(err, metastore.ErrConflict) {
			return
		}
		if t, err := d.readTail(ctx, part, false); err == nil && t.exists {
			_ = d.rollForward(ctx, part, t, now)
		}
		return
	}
	if !errors.Is(err, metastore.ErrNotFound) && err != nil {
		return
	}
	var st datastore.DropStats
	for i, e := range obj.Entries {
		if d.headIndexes() && !e.Deleted {
			// Its entries were to go into a head (headindex.go), which the
			// drop removed: no index object may hold them. Its live
			// versions go to Reclaim, which keeps any a path still holds.
			_ = d.markReplaced(ctx, e.Path, e.Version, e.Chunks, now)
		}
		_ = d.dropFileIf(ctx, e.Path, &indexEntry{logEntry: e, Pos: obj.First + uint64(i)}, now, &st)
	}
}

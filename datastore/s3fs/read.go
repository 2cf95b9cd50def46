package s3fs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
	"golang.org/x/sync/errgroup"
)

// upload is the value of u/STARTED/VERSION, the intent of an upload.
type upload struct {
	Path    string    `json:"path"`
	Started time.Time `json:"started"`
}

// BeginUpload implements datastore.Driver.
func (d *Driver) BeginUpload(ctx context.Context, s datastore.Staged) error {
	if err := d.checkPath(s.Path); err != nil {
		return err
	}
	body, _ := json.Marshal(upload{Path: s.Path, Started: s.Started.Round(0).UTC()})
	_, err := d.c.create(ctx, d.uploadKey(s.Version, s.Started), body)
	return err
}

// PutChunk implements datastore.Driver with a conditional create
// (If-None-Match: *), so a chunk is written once (issue 26). A chunk that
// exists is read back: the same bytes are a retry and succeed, other bytes
// a conflict.
func (d *Driver) PutChunk(ctx context.Context, version string, i int, data []byte) error {
	_, err := d.c.create(ctx, d.chunkKey(version, i), data)
	if !errors.Is(err, metastore.ErrConflict) {
		return err
	}
	cur, gerr := d.GetChunk(ctx, version, i)
	switch {
	case gerr != nil:
		return fmt.Errorf("%w: chunk %d of version %s exists and its read back failed: %v", metastore.ErrUnavailable, i, version, gerr)
	case bytes.Equal(cur, data):
		return nil
	}
	return metastore.Conflict(fmt.Sprintf("chunk %d of version %s", i, version), datastore.ChunkReason)
}

// GetChunk implements datastore.Driver.
func (d *Driver) GetChunk(ctx context.Context, version string, i int) ([]byte, error) {
	return d.c.getAtMost(ctx, d.chunkKey(version, i), datastore.ChunkSize)
}

// Stat implements datastore.Driver: per partition, its tail (the log after
// the applied watermark, normally empty), then the index entry of each path
// the tail does not answer.
func (d *Driver) Stat(ctx context.Context, paths []string) (map[string]datastore.Info, error) {
	if out, ok := d.aheadStat(ctx, paths); ok { // readahead.go
		return out, nil
	}
	out, tails, err := d.statTailsFrom(ctx, paths, nil, true)
	for part, t := range tails {
		d.handOff(part, t) // handoff.go
	}
	return out, err
}

// statTailsFrom is Stat, with the tail it read of each partition,
// starting from the tail known returns for a partition instead of reading
// it, where known (if not nil) returns one. A reader's (visible) counts
// the objects after a watermark that readers see (headcommit.go); a
// writer's clash check counts every object, which its commit's
// roll-forward applies before its own.
func (d *Driver) statTailsFrom(ctx context.Context, paths []string, known func(part string) *tail, visible bool) (map[string]datastore.Info, map[string]*tail, error) {
	byPart := map[string][]string{}
	for _, p := range paths {
		part := d.partition(p)
		byPart[part] = append(byPart[part], p)
	}
	out := map[string]datastore.Info{}
	tails := map[string]*tail{}
	for part, ps := range byPart {
		var t *tail
		if known != nil {
			t = known(part)
		}
		var err error
		if t == nil {
			if t, err = d.readTail(ctx, part, false); err != nil {
				return nil, nil, err
			}
		}
		tails[part] = t
		stat := d.statTail
		if visible {
			stat = d.statVisible
		}
		m, err := stat(ctx, t, ps)
		if err != nil {
			return nil, nil, err
		}
		for k, v := range m {
			out[k] = v
		}
	}
	return out, tails, nil
}

// List implements datastore.Driver over the path index: one LIST of up to
// limit keys, then a GET of each entry. It reflects every acknowledged
// commit: a commit is rolled into the index before it returns, and one
// whose roll-forward did not happen (its committer died) is rolled forward
// by the first page's settling of pending markers (pending.go).
func (d *Driver) List(ctx context.Context, prefix string, limit int, pos []byte) ([]datastore.Info, []byte, error) {
	start := ""
	if pos != nil {
		start = d.fileKey(string(pos))
	} else if err := d.settlePending(ctx); err != nil {
		// A commit whose committer died before rolling it into the
		// index is rolled forward first, so the listing holds it.
		return nil, nil, err
	}
	if d.headIndexes() {
		return d.listIndexed(ctx, prefix, limit, pos) // headindex.go
	}
	keys, more, err := d.c.list(ctx, d.prefix+"f/"+escape(prefix), start, limit)
	if err != nil {
		return nil, nil, err
	}
	if len(keys) > limit {
		keys, more = keys[:limit], true
	}
	var out []datastore.Info
	for _, k := range keys {
		p := unleaf(trimPrefix(k.key, d.prefix+"f/"))
		e, _, err := d.readIndex(ctx, p)
		if err != nil {
			return nil, nil, err
		}
		if e != nil && !e.Deleted {
			out = append(out, e.info(d.partition(p), e.Pos, e.Time))
		}
	}
	if !more || len(keys) == 0 {
		return out, nil, nil
	}
	return out, []byte(unleaf(trimPrefix(keys[len(keys)-1].key, d.prefix+"f/"))), nil
}

// Head implements datastore.Driver.
func (d *Driver) Head(ctx context.Context, part string) (datastore.Head, error) {
	t, err := d.readTail(ctx, part, false)
	if err != nil {
		return datastore.Head{}, err
	}
	return datastore.Head{Partition: part, Seq: d.readerSeq(t), Floor: t.h.Floor}, nil
}

// Changes implements datastore.Driver: a LIST of the log from after (with
// StartAfter) and a GET of each object that holds a later position, so a
// pull costs the changes since its position plus a constant, whatever the
// log held before. Within a page, a path keeps only its latest change; a
// change superseded after the page's end may still be returned, followed
// by the newer one in a later page.
func (d *Driver) Changes(ctx context.Context, part string, after uint64, limit int) ([]datastore.Info, uint64, error) {
	h, _, ok, err := d.readHead(ctx, part)
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		if after != 0 {
			return nil, 0, fmt.Errorf("%w: position %d is beyond the head 0 of partition %q", metastore.ErrInvalidArgument, after, part)
		}
		return nil, 0, nil
	}
	if after < h.Floor {
		return nil, 0, datastore.ErrHorizon
	}
	f, err := d.feedAfter(ctx, part, after, h.Applied, limit)
	if err != nil {
		return nil, 0, err
	}
	if !f.whole {
		// An object gone from the range read: compaction deleted it
		// (after raising the floor past any tombstone it held), or a
		// drop did. The head read now says which.
		h, _, ok, err := d.readHead(ctx, part)
		switch {
		case err != nil:
			return nil, 0, err
		case !ok && after == 0:
			return nil, 0, nil
		case !ok || h.Applied < after:
			return nil, 0, fmt.Errorf("%w: position %d is beyond the head %d of partition %q", metastore.ErrInvalidArgument, after, h.Applied, part)
		case after < h.Floor:
			return nil, 0, datastore.ErrHorizon
		}
	}
	return f.changes, f.upTo, nil
}

// ChangesFromHead implements datastore.WholeFeeder (issue 31): Changes up
// to the head h that ChangedPartitions has just read (its Seq is the
// applied watermark), without reading the head again: a LIST and the
// objects' GETs, not a GET, a LIST and the GETs.
//
// What Changes reads the head for is its floor: a purge raises it when it
// drops a tombstone, whose object compaction then deletes, and a reader
// whose position the floor passed may miss that deletion. But a read whose
// objects hold every position from after+1 to the position it returns
// missed no change at all, whatever the floor: nothing in that range was
// deleted. Only a read with a gap (an object deleted by compaction or a
// drop since h was read, a partition dropped and begun again) is not
// proven whole; it is made again as Changes makes it, which reads the head
// after a read with a gap too.
func (d *Driver) ChangesFromHead(ctx context.Context, h datastore.Head, after uint64, limit int) ([]datastore.Info, uint64, error) {
	if after >= h.Seq {
		return nil, h.Seq, nil
	}
	if objs, ok := d.offeredAfter(h.Partition, h.Seq, after); ok && after > 0 { // recent.go
		if f, err := d.feedOf(ctx, h.Partition, after, h.Seq, h.Seq, objs, limit); err == nil && f.whole {
			return f.changes, f.upTo, nil
		}
	}
	f, err := d.feedAfter(ctx, h.Partition, after, h.Seq, limit)
	if err != nil && !errors.Is(err, metastore.ErrInvalidArgument) {
		return nil, 0, err
	}
	if err == nil && f.whole {
		return f.changes, f.upTo, nil
	}
	return d.Changes(ctx, h.Partition, after, limit)
}

var _ datastore.WholeFeeder = (*Driver)(nil)

// feed is what feedAfter read of a partition's log.
type feed struct {
	changes []datastore.Info
	upTo    uint64
	// whole: the objects read hold every position from after+1 to upTo,
	// so no change in that range can be missing.
	whole bool
}

// feedAfter reads part's changes after position after, at most limit,
// from its log objects (applied is the head's watermark, as from takes
// it); a position after the log's end is metastore.ErrInvalidArgument.
func (d *Driver) feedAfter(ctx context.Context, part string, after, applied uint64, limit int) (feed, error) {
	objs, end, err := d.objectsAfter(ctx, part, after, applied, limit+1)
	if err != nil {
		return feed{}, err
	}
	return d.feedOf(ctx, part, after, max(end, applied), applied, objs, limit)
}

// feedOf is feedAfter's answer from objs, the log objects after position
// after in order, up to end; applied is the head's watermark, after which
// a models-v5 reader reads only staged parts (headcommit.go).
func (d *Driver) feedOf(ctx context.Context, part string, after, end, applied uint64, objs []*logObject, limit int) (feed, error) {
	if after > end {
		return feed{}, fmt.Errorf("%w: position %d is beyond the head %d of partition %q", metastore.ErrInvalidArgument, after, end, part)
	}
	var out []datastore.Info
	upTo := end
	walk := newFenceWalk(d)
collect:
	for _, o := range objs {
		if d.hiddenAfter(o, applied) {
			// No head holds it yet: stop right before it, as
			// before a commit not yet decided.
			upTo = max(after, o.First-1)
			break collect
		}
		if o.last() > after {
			pending, err := d.resolve(ctx, o) // whole.go
			if err != nil {
				return feed{}, err
			}
			if pending {
				// Not yet decided: stop right before it, so that no
				// puller moves past its positions.
				upTo = max(after, o.First-1) // every change collected lies below it
				break collect
			}
		}
		counts, err := walk.counts(ctx, o)
		if err != nil {
			return feed{}, err
		}
		if counts {
			for _, info := range o.infos(part) {
				if info.Pos <= after {
					continue
				}
				if len(out) == limit {
					upTo = out[len(out)-1].Pos
					break collect
				}
				out = append(out, info)
			}
		}
	}
	// The positions the objects read hold without a gap, from after+1.
	covered := after
	for _, o := range objs {
		if o.First > covered+1 {
			break
		}
		covered = max(covered, o.last())
	}
	return feed{changes: latestOnly(out), upTo: upTo, whole: covered >= upTo}, nil
}

// objectsAfter is from for a feed read: when the reader stands at an
// object's end below the watermark, as a pull from where the last one
// stopped does, the object after it starts at after+1 and is read first,
// by its name, without a LIST; if it reaches the watermark (one commit
// since, the seed's loop's usual case) that GET is the whole read, else
// the log is listed from its end. A reader that stands elsewhere (inside
// an object, or before one compaction deleted) finds no object there and
// reads as from does, one GET later.
func (d *Driver) objectsAfter(ctx context.Context, part string, after, applied uint64, limit int) ([]*logObject, uint64, error) {
	if after == 0 || applied <= after {
		return d.from(ctx, part, after, applied, limit)
	}
	o, err := d.readLog(ctx, part, d.logKey(part, after+1), after+1)
	if errors.Is(err, metastore.ErrNotFound) {
		return d.from(ctx, part, after, applied, limit)
	}
	if err != nil {
		return nil, 0, err
	}
	if o.last() >= applied || len(o.Entries) >= limit {
		return []*logObject{o}, o.last(), nil
	}
	rest, end, err := d.from(ctx, part, o.last(), applied, limit-len(o.Entries))
	if err != nil {
		return nil, 0, err
	}
	return append([]*logObject{o}, rest...), max(end, o.last()), nil
}

// latestOnly keeps the last change of each path, in position order.
func latestOnly(in []datastore.Info) []datastore.Info {
	last := map[string]uint64{}
	for _, c := range in {
		last[c.Path] = c.Pos
	}
	out := in[:0]
	for _, c := range in {
		if last[c.Path] == c.Pos {
			out = append(out, c)
		}
	}
	return out
}

// Partitions implements datastore.Driver: a LIST of the heads.
func (d *Driver) Partitions(ctx context.Context) ([]string, error) {
	return d.listPartitions(ctx, false)
}

// headPartition returns the partition a head key names; ok is false for a
// key that names none (a foreign object under h/, which readers skip and
// lake data check reports: one stray key must not stop every sync).
func (d *Driver) headPartition(key string) (string, bool) {
	esc := trimPrefix(key, d.prefix+"h/")
	p, err := url.PathUnescape(esc)
	if err != nil || datastore.ValidatePartition(p) != nil || url.PathEscape(p) != esc {
		return "", false
	}
	return p, true
}

// ChangedPartitions implements datastore.Driver: a LIST of the heads, whose
// ETags change with every commit rolled forward, compared with the ETags
// the cursor remembers; then the head of each partition that changed, at
// most headsParallel at once. The LIST costs one request per thousand
// partitions and the cursor grows with the partitions (a short digest
// each): S3 has no index a write could update in the same atomic write as
// the change.
//
// A head's Seq is its applied watermark: the pending marks are settled
// before the listing (listSettledHeads), so every acknowledged commit is
// rolled into its head, and a commit that lands after the listing moves
// its head's ETag, which the next call names. So the log after the
// watermark is not listed (issue 31: one GET a changed partition, not a
// GET and a LIST), and ChangesFromHead reads the feed up to it.
func (d *Driver) ChangedPartitions(ctx context.Context, cursor []byte) ([]datastore.Head, []byte, error) {
	prev := map[string]string{}
	if len(cursor) > 0 {
		if err := json.Unmarshal(cursor, &prev); err != nil {
			return nil, nil, fmt.Errorf("%w: not an s3 feed cursor", metastore.ErrInvalidCursor)
		}
	}
	// A commit not yet rolled into its head would leave the head's ETag
	// unchanged: settle the pending ones first.
	keys, err := d.aheadHeads(ctx) // readahead.go
	if err != nil {
		return nil, nil, err
	}
	next := make(map[string]string, len(keys))
	var changed []string
	for _, k := range keys {
		part, ok := d.headPartition(k.key)
		if !ok {
			continue // not a head: lake data check reports it
		}
		tag := shortTag(k.etag)
		next[part] = tag
		if prev[part] != tag {
			changed = append(changed, part)
		}
	}
	read := make([]struct {
		h      head
		exists bool
	}, len(changed))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(headsParallel)
	for i, part := range changed {
		g.Go(func() error {
			h, etag, exists, err := d.readHead(gctx, part)
			read[i].h, read[i].exists = h, exists
			if err == nil && exists {
				d.offerRecent(part, h) // for the feed read of it (recent.go)
				if h.ClaimsOnly && d.cleanIn(keys, part, etag) {
					// A claims host's whole tail, for the clash check
					// of the sync's new model (clash.go's statOthers).
					d.handOff(part, &tail{h: h, hetag: etag, exists: true})
				}
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	var heads []datastore.Head
	for i, part := range changed {
		hd := read[i].h
		switch {
		case !read[i].exists || hd.Applied == 0:
			delete(next, part) // registered, nothing committed yet (or gone since the listing)
		case hd.ClaimsOnly:
			// Claims only (claimsonly.go), and so reported by no
			// answer whatever its log holds (issue 31: a model's
			// first commit and its drop move data's head, read back
			// by the next pull and fold).
		default:
			heads = append(heads, datastore.Head{Partition: part, Seq: hd.Applied, Floor: hd.Floor})
		}
	}
	b, _ := json.Marshal(next)
	d.c.moves.Read(d.prefix, b) // cursorover.go
	return heads, b, nil
}

// headsParallel bounds the heads ChangedPartitions reads at once.
const headsParallel = 8

// listSettledHeads lists h/ after settling every pending mark, so that
// each head's ETag covers every acknowledged commit. Beside the heads
// (marksBesideHeads) that is one LIST, normally: a second one only when the
// first returned a mark, whose settling moved heads. Under p/ it is the
// LIST of p/, then that of h/.
func (d *Driver) listSettledHeads(ctx context.Context) ([]listed, error) {
	if !d.marksBesideHeads() {
		if err := d.settlePending(ctx); err != nil {
			return nil, err
		}
		return d.c.listAll(ctx, d.prefix+"h/", "")
	}
	keys, err := d.c.listAll(ctx, d.prefix+"h/", "")
	if err != nil || !d.hasMarks(keys) {
		return keys, err
	}
	rest, moved, err := d.settleMarks(ctx, keys, time.Now())
	if err != nil || !moved {
		// Nothing rolled forward: the heads listed hold every commit
		// acknowledged before the listing (settleMarks).
		return rest, err
	}
	return d.c.listAll(ctx, d.prefix+"h/", "")
}

// HasIntent implements datastore.IntentChecker with one HEAD of the
// intent's object.
func (d *Driver) HasIntent(ctx context.Context, version string, started time.Time) (bool, error) {
	_, err := d.c.head(ctx, d.uploadKey(version, started))
	if errors.Is(err, metastore.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

var _ datastore.IntentChecker = (*Driver)(nil)

// ReadsWhole reports that neither a Stat of several paths nor a listing
// page is a snapshot: each reads the path index one entry at a time while
// a commit landing meanwhile is rolled into it (the conformance suite's
// StatSeesCommitWhole and ListSeesCommitWhole, docs/datastore.md). A pull
// reads log objects, each a commit's whole change to its partition.
func (d *Driver) ReadsWhole(string) bool { return false }

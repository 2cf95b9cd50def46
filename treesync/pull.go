package treesync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/metastore"
)

// pageLimit is the page of one Changes call.
const pageLimit = 1000

// pullPlan is what a pull read from the feed, before applying it.
type pullPlan struct {
	// changes holds the latest change of each path read, by path.
	changes map[string]datastore.Info
	// positions are the positions the pull can vouch for: every change of
	// the partition at or below was read.
	positions map[string]uint64
	// cursor is the next unscoped cursor, set by an unscoped pull only.
	cursor   string
	unscoped bool
	// pulled is the unscoped pull's ChangedPartitions read, for the
	// catalog fold (catalog.FoldOptions.Pulled); nil for a scoped pull.
	pulled *catalog.Pulled
	read   int
	sk     *skips
	// layout is the datastore's, which a change's path must agree with.
	layout datastore.Layout
}

// plan reads the feed of the scope: the named partitions from their own
// positions, or, unscoped, the partitions that changed since the unscoped
// cursor. It reads only changes (and, past the tombstone horizon, one
// partition whole). The dropped partitions (pruned models, named by the
// catalog) are read whole too, which removes their files.
//
// A change the tree must never write (a path no valid client writes, one
// under .lake, one filed in another partition's feed: a foreign writer's)
// is skipped into sk and not planned; so is a partition whose name is not
// valid. The paths skipped by earlier syncs (st.Skipped) are planned again.
func (t *Tree) plan(ctx context.Context, st *state, models, dropped []string, sk *skips) (*pullPlan, error) {
	pl := &pullPlan{changes: map[string]datastore.Info{}, positions: map[string]uint64{}, sk: sk, layout: t.store.Layout()}
	parts := models
	var first map[string]datastore.HeadChanges // the unscoped pull's first pages
	if len(models) == 0 {
		cur := ""
		if st.Unscoped {
			cur = st.Cursor
		}
		heads, next, err := t.store.ChangedPartitions(ctx, cur)
		if err != nil {
			return nil, err
		}
		pl.cursor, pl.unscoped = next, true
		pl.pulled = &catalog.Pulled{From: cur, Heads: heads, Next: next}
		parts = nil
		var changed []datastore.Head
		for _, h := range heads {
			if err := datastore.ValidatePartition(h.Partition); err != nil || reservedSegment(h.Partition) {
				sk.add(fmt.Sprintf("partition %q", h.Partition), fmt.Sprintf("is not a partition lake writes (a foreign writer's entry, under the reserved %s or not a valid path); it is never pulled (delete it in the backend)", StateDir))
				continue
			}
			if h.Seq > st.Positions[h.Partition] {
				parts = append(parts, h.Partition)
				changed = append(changed, h)
			}
		}
		// Each changed partition's feed up to the head just read, and
		// on DynamoDB their floors in one read after them all
		// (datastore.ChangesOfHeads).
		if first, err = t.store.ChangesOfHeads(ctx, changed, st.Positions, pageLimit); err != nil {
			return nil, err
		}
	}
	for _, part := range parts {
		var page *datastore.HeadChanges
		if hc, ok := first[part]; ok {
			page = &hc
		}
		if err := t.pullPartition(ctx, st, pl, part, page); err != nil {
			return nil, err
		}
	}
	for _, part := range dropped {
		if len(models) > 0 && !slices.Contains(models, part) {
			continue
		}
		delete(st.Positions, part)
		if err := t.resync(ctx, st, pl, part); err != nil {
			return nil, err
		}
	}
	// Retry what earlier syncs skipped: the latest remote state of each.
	for p := range st.Skipped {
		if _, ok := pl.changes[p]; !ok && t.inScope(models, p) && checkLocalPath(p) == nil {
			pl.changes[p] = datastore.Info{Path: p, Partition: t.store.Partition(p)}
		}
	}
	return pl, nil
}

// add plans change c, read from partition part's feed or listing, unless the
// tree must never write it.
func (pl *pullPlan) add(part string, c datastore.Info) {
	pl.read++
	if pl.sk.entry(checkRemotePath(pl.layout, c.Path, part)) {
		return
	}
	if prev, ok := pl.changes[c.Path]; !ok || c.Pos > prev.Pos {
		pl.changes[c.Path] = c
	}
}

// pullPartition plans part's changes since the tree's position, starting
// from first when the unscoped pull read its first page already.
func (t *Tree) pullPartition(ctx context.Context, st *state, pl *pullPlan, part string, first *datastore.HeadChanges) error {
	after := st.Positions[part]
	for {
		var ch []datastore.Info
		var upTo uint64
		var err error
		switch {
		case first != nil && first.Horizon:
			err = datastore.ErrHorizon
		case first != nil:
			ch, upTo = first.Changes, first.UpTo
		default:
			ch, upTo, err = t.store.Changes(ctx, part, after, pageLimit)
		}
		first = nil
		// Below the tombstone horizon, or beyond the head (a datastore
		// recreated under an old state): read the partition whole.
		if errors.Is(err, datastore.ErrHorizon) || (after > 0 && errors.Is(err, metastore.ErrInvalidArgument)) {
			return t.resync(ctx, st, pl, part)
		}
		if err != nil {
			return err
		}
		for _, c := range ch {
			pl.add(part, c)
		}
		if len(ch) == pageLimit && upTo <= after {
			return fmt.Errorf("lake: the feed of partition %q did not move past position %d; run lake data check", part, after)
		}
		after = upTo
		if len(ch) < pageLimit {
			break
		}
	}
	pl.positions[part] = after
	return nil
}

// resync reads a partition whole, for a position below its tombstone
// horizon: its head, then its live files; a synced path not listed was
// deleted.
func (t *Tree) resync(ctx context.Context, st *state, pl *pullPlan, part string) error {
	h, err := t.store.Head(ctx, part)
	if err != nil {
		return err
	}
	files, err := t.store.ListPartitionAll(ctx, part, "")
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, f := range files {
		if t.store.Partition(f.Path) == part {
			live[f.Path] = true
			pl.add(part, f)
		}
	}
	for p, fs := range st.Files {
		if t.store.Partition(p) == part && !live[p] {
			pl.add(part, datastore.Info{Path: p, Partition: part, Deleted: true, Pos: fs.Pos})
		}
	}
	pl.positions[part] = h.Seq
	return nil
}

// sorted returns the plan's changes by path.
func (pl *pullPlan) sorted() []datastore.Info {
	out := make([]datastore.Info, 0, len(pl.changes))
	for _, c := range pl.changes {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// needed reports whether change c differs from what the tree last synced.
func needed(st *state, c datastore.Info) bool {
	fs, ok := st.Files[c.Path]
	if c.Deleted {
		return ok
	}
	return !ok || fs.Version != c.Version
}

// apply makes the local file of c's path what the remote holds now: the
// latest version, written atomically (temp file and rename), or removed. A
// path the tree cannot write (a link or a file in its way, a directory at
// it) is an *entryError, recorded in st.Skipped so that every sync retries
// it until it applies or the remote entry is gone.
func (t *Tree) apply(ctx context.Context, st *state, c datastore.Info, rep *Report) error {
	err := t.applyOne(ctx, st, c, rep)
	if err == nil {
		delete(st.Skipped, c.Path)
	}
	st.skip(c.Path, err)
	return err
}

// skip records the remote path p as skipped if err is an *entryError, so
// that every sync retries it until it applies or is gone remotely.
func (st *state) skip(p string, err error) {
	var ee *entryError
	if errors.As(err, &ee) {
		if st.Skipped == nil {
			st.Skipped = map[string]string{}
		}
		st.Skipped[p] = ee.why
	}
}

func (t *Tree) applyOne(ctx context.Context, st *state, c datastore.Info, rep *Report) error {
	if c.Deleted {
		return t.removeLocal(st, c.Path, rep)
	}
	// Streamed into the tree in constant memory: GetTo checks size and
	// SHA-256 chunk by chunk, and a damaged file never replaces the local
	// one (issue 26).
	// A small file's content came with the change itself (inline, issue
	// 31): it is written from c, checked against its SHA-256, with no
	// further read.
	var info datastore.Info
	fi, err := t.fs.writeFrom(c.Path, func(w io.Writer) error {
		if ok, err := datastore.WriteInline(c, w); ok {
			info = c
			return err
		}
		var err error
		info, err = t.store.GetTo(ctx, c.Path, w)
		return err
	})
	if isNotFound(err) {
		return t.removeLocal(st, c.Path, rep)
	}
	if ue := unreadable(c.Path, err); ue != nil {
		return ue
	}
	if err != nil {
		return err
	}
	st.Files[c.Path] = record(fi, info, t.now())
	rep.Downloaded++
	return nil
}

func (t *Tree) removeLocal(st *state, p string, rep *Report) error {
	if err := t.fs.remove(p); err != nil {
		return err
	}
	if _, ok := st.Files[p]; ok {
		rep.Removed++
	}
	delete(st.Files, p)
	return nil
}

package treesync

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/lakemeta/lake/datastore"
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
	read     int
}

// plan reads the feed of the scope: the named partitions from their own
// positions, or, unscoped, the partitions that changed since the unscoped
// cursor. It reads only changes (and, past the tombstone horizon, one
// partition whole). The dropped partitions (pruned models, named by the
// catalog) are read whole too, which removes their files.
func (t *Tree) plan(ctx context.Context, st *state, models, dropped []string) (*pullPlan, error) {
	pl := &pullPlan{changes: map[string]datastore.Info{}, positions: map[string]uint64{}}
	parts := models
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
		parts = nil
		for _, h := range heads {
			if h.Seq > st.Positions[h.Partition] {
				parts = append(parts, h.Partition)
			}
		}
	}
	for _, part := range parts {
		if err := t.pullPartition(ctx, st, pl, part); err != nil {
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
	return pl, nil
}

func (pl *pullPlan) add(c datastore.Info) {
	pl.read++
	if prev, ok := pl.changes[c.Path]; !ok || c.Pos > prev.Pos {
		pl.changes[c.Path] = c
	}
}

func (t *Tree) pullPartition(ctx context.Context, st *state, pl *pullPlan, part string) error {
	after := st.Positions[part]
	for {
		ch, upTo, err := t.store.Changes(ctx, part, after, pageLimit)
		// Below the tombstone horizon, or beyond the head (a datastore
		// recreated under an old state): read the partition whole.
		if errors.Is(err, datastore.ErrHorizon) || (after > 0 && errors.Is(err, metastore.ErrInvalidArgument)) {
			return t.resync(ctx, st, pl, part)
		}
		if err != nil {
			return err
		}
		for _, c := range ch {
			pl.add(c)
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
	files, err := t.store.ListAll(ctx, datastore.PartitionPrefix(part))
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, f := range files {
		if datastore.Partition(f.Path) == part {
			live[f.Path] = true
			pl.add(f)
		}
	}
	for p, fs := range st.Files {
		if datastore.Partition(p) == part && !live[p] {
			pl.add(datastore.Info{Path: p, Partition: part, Deleted: true, Pos: fs.Pos})
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
// latest version, written atomically (temp file and rename), or removed.
func (t *Tree) apply(ctx context.Context, st *state, c datastore.Info, rep *Report) error {
	if c.Deleted {
		return t.removeLocal(st, c.Path, rep)
	}
	info, data, err := t.store.Get(ctx, c.Path)
	if isNotFound(err) {
		return t.removeLocal(st, c.Path, rep)
	}
	if err != nil {
		return err
	}
	name := t.localPath(c.Path)
	if err := writeAtomic(filepath.Join(t.dir, StateDir), name, data, 0o644); err != nil {
		return err
	}
	fs, err := recordWritten(name, info, t.now())
	if err != nil {
		return err
	}
	st.Files[c.Path] = fs
	rep.Downloaded++
	return nil
}

func (t *Tree) removeLocal(st *state, p string, rep *Report) error {
	if err := os.Remove(t.localPath(p)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("lake: %w", err)
	}
	t.removeEmptyParents(p)
	if _, ok := st.Files[p]; ok {
		rep.Removed++
	}
	delete(st.Files, p)
	return nil
}

// removeEmptyParents removes the directories above path that its removal
// left empty, up to the tree's root, so that a tree whose models come and go
// does not accumulate empty directories for its walk to visit.
func (t *Tree) removeEmptyParents(p string) {
	for dir := filepath.Dir(t.localPath(p)); dir != t.dir && strings.HasPrefix(dir, t.dir+string(filepath.Separator)); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil { // not empty, or gone
			return
		}
	}
}

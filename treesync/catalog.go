package treesync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/datastore/dslock"
	"github.com/lakemeta/lake/datastore/lifecycle"
	"github.com/lakemeta/lake/lock"
)

// CatalogFile is the tree's mirror of the catalog of every namespace,
// DIR/.lake/catalog.json: one row per model, kept up to date by each sync
// from the catalog's changes only.
const CatalogFile = "catalog.json"

func (t *Tree) catalogPath() string { return filepath.Join(t.dir, StateDir, CatalogFile) }

// readCatalog brings the tree's mirror of the catalog up to date: with
// CatalogIncremental the changes since the tree's cursor, with
// CatalogExport the whole catalog. It returns the models of the tree's own
// namespace whose rows were removed (pruned): their partitions are read
// again whole by the pull, which removes their files.
func (t *Tree) readCatalog(ctx context.Context, st *state, rep *Report, sk *skips) ([]string, error) {
	if t.opts.Catalog == CatalogOff {
		return nil, nil
	}
	if t.opts.Catalog == CatalogExport {
		mirror, err := t.loadCatalog()
		if errors.Is(err, errMirrorDamaged) {
			mirror, err = map[string]catalog.Row{}, t.dropMirror(rep) // read whole below anyway
		}
		if err != nil {
			return nil, err
		}
		var removed []string
		own := t.opts.Namespace
		rows, skipped, err := catalog.All(ctx, t.root, "")
		if err != nil {
			return nil, err
		}
		for _, s := range skipped {
			sk.add(s.Entry, s.Why)
		}
		rep.CatalogRead = len(rows)
		fresh := map[string]catalog.Row{}
		for _, r := range rows {
			fresh[r.Namespace+"/"+r.Model] = r
		}
		for k, r := range mirror {
			if _, ok := fresh[k]; !ok && r.Namespace == own {
				removed = append(removed, r.Model)
			}
		}
		return removed, t.saveCatalog(fresh)
	}
	ch, next, err := catalog.Read(ctx, t.root, st.Catalog)
	if err != nil {
		return nil, err
	}
	return t.applyCatalogOrHeal(ctx, st, rep, sk, ch, next)
}

// applyCatalog brings the mirror up to date with ch, the catalog's changes
// from st's cursor to next (catalog.Read's), and returns the models of the
// tree's own namespace whose rows were removed. The entries Read left out
// (a foreign writer's) are named in sk: the sync goes on and reports them.
func (t *Tree) applyCatalog(st *state, rep *Report, sk *skips, ch catalog.Changes, next catalog.Cursor) ([]string, error) {
	for _, s := range ch.Skipped {
		sk.add(s.Entry, s.Why)
	}
	mirror, err := t.loadCatalog()
	if err != nil {
		return nil, err
	}
	var removed []string
	own := t.opts.Namespace
	rep.CatalogRead = ch.Read
	for _, ns := range ch.Reset {
		for k, r := range mirror {
			if r.Namespace == ns {
				delete(mirror, k)
				if ns == own {
					removed = append(removed, r.Model)
				}
			}
		}
	}
	for _, c := range ch.Changes {
		k := c.Namespace + "/" + c.Model
		if c.Removed {
			delete(mirror, k)
			if c.Namespace == own {
				removed = append(removed, c.Model)
			}
			continue
		}
		mirror[k] = c.Row
	}
	st.Catalog = next
	if len(ch.Changes) == 0 && len(ch.Reset) == 0 {
		return nil, nil
	}
	slices.Sort(removed)
	return slices.Compact(removed), t.saveCatalog(mirror)
}

// Catalog returns the tree's mirror of the catalog as of its last sync, by
// NAMESPACE/TYPE/ID.
func (t *Tree) Catalog() (map[string]catalog.Row, error) { return t.loadCatalog() }

func (t *Tree) loadCatalog() (map[string]catalog.Row, error) {
	b, err := t.fs.readState(CatalogFile)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]catalog.Row{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lake: read the catalog mirror: %w", err)
	}
	m := map[string]catalog.Row{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w %s (remove it; the next sync reads the catalog whole): %v", errMirrorDamaged, t.catalogPath(), err)
	}
	return m, nil
}

// errMirrorDamaged is loadCatalog's error for a mirror that does not
// decode (an edit, a disk's damage): a sync rebuilds it
// (applyCatalogOrHeal).
var errMirrorDamaged = errors.New("lake: damaged catalog mirror")

// applyCatalogOrHeal is applyCatalog, which reads the mirror; a mirror
// that does not decode is the catalog's copy, so it is removed and the
// catalog read whole, as by a new tree, and applied instead, with a
// warning, rather than failing the sync before its push. A model of the
// tree's own namespace pruned since the mirror's last good state is then
// not seen as removed: its files stay in the tree until deleted by hand,
// as after removing the mirror by hand.
func (t *Tree) applyCatalogOrHeal(ctx context.Context, st *state, rep *Report, sk *skips, ch catalog.Changes, next catalog.Cursor) ([]string, error) {
	removed, err := t.applyCatalog(st, rep, sk, ch, next)
	if !errors.Is(err, errMirrorDamaged) {
		return removed, err
	}
	if err := t.dropMirror(rep); err != nil {
		return nil, err
	}
	if ch, next, err = catalog.Read(ctx, t.root, catalog.Cursor{}); err != nil {
		return nil, err
	}
	return t.applyCatalog(st, rep, sk, ch, next)
}

// dropMirror removes a mirror that does not decode, and says so.
func (t *Tree) dropMirror(rep *Report) error {
	if err := t.fs.removeState(CatalogFile); err != nil {
		return err
	}
	rep.Warnings = append(rep.Warnings, fmt.Sprintf("the catalog mirror %s did not decode: removed; this sync reads the catalog whole", t.catalogPath()))
	return nil
}

func (t *Tree) saveCatalog(m map[string]catalog.Row) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("lake: encode the catalog mirror: %w", err)
	}
	return t.fs.writeState(CatalogFile, b)
}

// prefetchRows returns ctx asking the commit of push to read, with its own
// read, what the catalog fold's commit of the rows of push's models will
// read (datastore.Store.PrefetchCommit: on DynamoDB one TransactGetItems
// fewer a sync that commits); ctx as it is without a catalog.
func (t *Tree) prefetchRows(ctx context.Context, push []LocalChange) context.Context {
	if t.opts.Catalog == CatalogOff || len(push) == 0 {
		return ctx
	}
	cat, err := t.store.CatalogStore()
	if err != nil {
		return ctx // the fold reports it
	}
	var rows []string
	for _, c := range push {
		if m := t.store.Partition(c.Path); catalog.IsModel(m) {
			rows = append(rows, catalog.RowPath(t.opts.Namespace, m))
		}
	}
	slices.Sort(rows)
	return cat.PrefetchCommit(ctx, slices.Compact(rows))
}

// maintain runs after the commit, under the lock and fenced by it: the fold
// of the namespace's changes into the catalog (and into the tree's mirror),
// then, if the namespace's lifecycle is enabled, the expiry of what it lets
// go, planned from the mirror (read incrementally, so planning reads
// nothing), a second fold for the versions it deleted, and a Reclaim at
// most every quarter of the horizon. Dropped models' files are removed from
// the tree.
func (t *Tree) maintain(ctx context.Context, ls *lock.Lease, st *state, rep *Report) error {
	if t.opts.Catalog == CatalogOff {
		return nil
	}
	start := time.Now()
	defer func() { rep.Lifecycle = time.Since(start) }()
	st.Policy = nil // set again only if all of it completes
	fence := dslock.Fence(ls)
	mirror, err := t.loadCatalog()
	if err != nil {
		return err
	}
	// Each fold is given states read under this lock after the rows it
	// reads were written (FoldOptions.Before): the first, those the
	// push read before the commit; the lifecycle's, the files it read
	// before deleting them (never the push's: the first fold wrote rows
	// after that read). The cursor the last fold left spares the read of its record; the
	// fold checks it (FoldOptions.Cursor). Kept only once a fold has
	// completed.
	cursor := st.FoldCursor
	st.FoldCursor = ""
	// The pull's read of the index serves the first fold only: the
	// lifecycle writes after it, and a later fold must read past those
	// writes (FoldOptions.Pulled).
	pulled := rep.pulled
	// apply keeps what a fold did: its cursor, its rows in the mirror,
	// the catalog cursor moved past its commit.
	apply := func(fs catalog.FoldStats) {
		cursor = fs.Cursor
		rep.CatalogFolded += fs.Rows + fs.Removed
		rep.CatalogForwarded += fs.Forwarded
		for _, r := range fs.Written {
			mirror[r.Namespace+"/"+r.Model] = r
		}
		for _, m := range fs.Gone {
			delete(mirror, t.opts.Namespace+"/"+m)
		}
		t.catalogPast(st, fs.Committed, fs.Applied)
	}
	fold := func(before map[string]datastore.Info, committed []datastore.Info, rows map[string]datastore.Info) error {
		fs, err := catalog.FoldWith(ctx, t.store, fence, catalog.FoldOptions{Before: before, Cursor: cursor, Committed: committed, Rows: rows, Pulled: pulled})
		pulled = nil
		if err != nil {
			return fmt.Errorf("catalog fold: %w", err)
		}
		apply(fs)
		return nil
	}
	// The first fold is also given what the commit applied: a row at the
	// position right before it is brought forward over it without a read
	// of the feed (FoldOptions.Committed); and the dirty models' rows
	// read ahead under this lock (FoldOptions.Rows), never to a later
	// fold, which must read the rows the first wrote. The commit may have
	// carried it (planFold): it is then done.
	fs, carried := rep.plan.Stats(rep.committed)
	if carried {
		apply(fs)
		pulled = nil
	} else {
		if c := rep.plan.Cursor(); c != "" {
			cursor = c // carried over part of the commit only: fold the rest
			pulled = nil
		}
		if err := fold(rep.stated, rep.committed, rep.rows); err != nil {
			return err
		}
	}
	cfg, err := t.syncConfig(ctx, st) // policy.go
	if err != nil {
		return err
	}
	if cfg.Lifecycle.Enabled {
		if err := t.expire(ctx, fence, st, mirror, cfg.Lifecycle, fold, rep); err != nil {
			return err
		}
	}
	if rep.CatalogFolded+rep.PrunedModels > 0 {
		if err := t.saveCatalog(mirror); err != nil {
			return err
		}
	}
	st.Policy = &cfg.Lifecycle
	st.FoldCursor = cursor
	t.keepRecord(ctx, st, carried && !rep.plan.Recorded())
	return nil
}

// keepRecord counts a sync whose fold left the fold cursor's record
// (left: carried by the commit on S3), and brings the record up to date
// every recordEvery such syncs, so that a fold from it reads a few syncs'
// changes, not the namespace's history. A fold of its own writes the
// record (catalog.FoldWith), as DynamoDB's carried one does: the count
// starts again from the tree's cursor. Best effort: a failed write leaves
// the record behind, which costs such a fold reads, never a row.
func (t *Tree) keepRecord(ctx context.Context, st *state, left bool) {
	if !left {
		st.FoldsUnrecorded, st.FoldRecorded = 0, st.FoldCursor
		return
	}
	if st.FoldsUnrecorded++; st.FoldsUnrecorded < recordEvery || st.FoldCursor == "" {
		return
	}
	if err := catalog.RecordCursor(ctx, t.store, st.FoldRecorded, st.FoldCursor); err == nil {
		st.FoldRecorded = st.FoldCursor
	}
	st.FoldsUnrecorded = 0
}

// expire applies the namespace's lifecycle policy p, planned from the
// tree's mirror of its catalog rows.
func (t *Tree) expire(ctx context.Context, fence *datastore.Fence, st *state, mirror map[string]catalog.Row, p datastore.Lifecycle, fold func(before map[string]datastore.Info, committed []datastore.Info, rows map[string]datastore.Info) error, rep *Report) error {
	var rows []catalog.Row
	for _, r := range mirror {
		if r.Namespace == t.opts.Namespace {
			rows = append(rows, r)
		}
	}
	actions, err := lifecycle.PlanRows(ctx, t.store, rows, p, t.store.Now())
	if err != nil {
		return err
	}
	ls, err := lifecycle.Apply(ctx, t.store, fence, actions)
	if err != nil {
		return fmt.Errorf("lifecycle: %w", err)
	}
	rep.PrunedModels, rep.PrunedVersions, rep.PrunedFiles = ls.Models, ls.Versions, ls.Files
	for _, m := range ls.Dropped {
		delete(mirror, t.opts.Namespace+"/"+m)
		t.forgetPartition(st, m)
	}
	// The mirror forgot the removed rows: move the catalog cursor past
	// their removal where the store proves nothing else moved it, as the
	// fold does past its rows, so the next sync does not read them back.
	for _, applied := range ls.Removed {
		var heads []datastore.Head
		for _, a := range applied {
			heads = append(heads, datastore.Head{Partition: a.Partition, Seq: a.Pos})
		}
		t.catalogPast(st, heads, applied)
	}
	if ls.Versions > 0 {
		// The files Apply read before deleting them were read after the
		// first fold's rows, under this lock: they say what those rows
		// counted (FoldOptions.Before).
		if err := fold(ls.Read, nil, nil); err != nil {
			return err
		}
	}
	if t.reclaimDue(st, p) {
		now := t.now()
		rs, err := lifecycle.Reclaim(ctx, t.store, p)
		if err != nil {
			return fmt.Errorf("lifecycle reclaim: %w", err)
		}
		rep.Reclaimed = rs.Tombstones
		st.Reclaimed = now.UnixNano()
	}
	return nil
}

// forgetPartition removes the tree's clean files of a dropped partition and
// its position; a file changed locally since its sync stays (and is pushed
// by the next sync, which starts the partition again).
func (t *Tree) forgetPartition(st *state, part string) {
	for p := range st.Files {
		if t.store.Partition(p) != part {
			continue
		}
		if _, changed, err := t.check(st, p); err == nil && !changed {
			if t.fs.remove(p) == nil {
				delete(st.Files, p)
			}
		}
	}
	delete(st.Positions, part)
}

// noteStated keeps the remote states of paths a batch stat under the lock
// read (remote: StatMany's answer), a path it did not return as a
// tombstone, for the catalog fold of this sync (catalog.FoldOptions.Before).
// A later stat of a path replaces an earlier one: both were read under the
// lock, before the commit, which is all the fold asks.
func (rep *Report) noteStated(paths []string, remote map[string]datastore.Info) {
	if rep.stated == nil {
		rep.stated = map[string]datastore.Info{}
	}
	for _, p := range paths {
		if info, ok := remote[p]; ok {
			rep.stated[p] = info
		} else {
			rep.stated[p] = datastore.Info{Path: p, Deleted: true}
		}
	}
}

// catalogPast moves the tree's catalog positions and cursor past a catalog
// commit of this sync (committed: its positions; applied: what it applied,
// nil if it was not one commit), where nothing else moved them.
func (t *Tree) catalogPast(st *state, committed []datastore.Head, applied []datastore.Info) {
	advanceCatalog(st, committed)
	if c, ok := catalog.CatalogCursorOver(t.root, st.Catalog, applied); ok {
		st.Catalog = c
	}
}

// advanceCatalog moves the tree's catalog positions past the fold's own
// commit when its positions follow them with no gap (nobody else wrote the
// partition in between), as advance does for a sync's commit: the mirror
// already holds those rows, so the next read need not fetch them back.
func advanceCatalog(st *state, committed []datastore.Head) {
	byPart := map[string][]uint64{}
	for _, h := range committed {
		byPart[h.Partition] = append(byPart[h.Partition], h.Seq)
	}
	for part, ps := range byPart {
		slices.Sort(ps)
		next := st.Catalog.Positions[part] // 0: the partition's first entries are the fold's
		if st.Catalog.Positions == nil {
			st.Catalog.Positions = map[string]uint64{}
		}
		for _, p := range ps {
			if p != next+1 {
				break
			}
			next = p
		}
		st.Catalog.Positions[part] = next
	}
}

// recordEvery is how many folds the syncs' commits carry, leaving the fold
// cursor's record where its write is a request of its own (S3), before a
// sync writes it (catalog.RecordCursor); the tree keeps the cursor
// meanwhile (catalog.FoldOptions.CursorOptional). A tree with no cursor of
// its own folds from the record's, reading the partitions changed since:
// the heads of a few syncs' worth, not of the namespace's history.
const recordEvery = 16

// planFold returns the context for the sync's commit, asking it to carry
// the catalog fold that follows it (catalog.PlanFold, planned from what
// the commit will apply: on DynamoDB the rows and the fold cursor's record
// in the commit's own transaction, one transaction fewer a sync that
// commits; issue 31); the plan the commit was last asked for is rep.plan.
// Only with the catalog on and a fold cursor the last fold left (the plan
// reads nothing to learn it); a commit that does not carry it leaves
// maintain's fold as it was.
func (t *Tree) planFold(ctx context.Context, ls *lock.Lease, st *state, rep *Report) context.Context {
	if t.opts.Catalog == CatalogOff || st.FoldCursor == "" {
		return ctx
	}
	fence := dslock.Fence(ls)
	cctx, _ := t.store.WithCommitFollower(ctx, func(applied []datastore.Info, over func(string) ([]datastore.Head, string, bool)) *datastore.CommitRider {
		p, ok := catalog.PlanFold(ctx, t.store, fence, catalog.FoldOptions{Before: rep.stated, Cursor: st.FoldCursor, Committed: applied, Rows: rep.rows, Pulled: rep.pulled,
			CursorOptional: true}, over)
		if !ok {
			rep.plan = nil
			return nil
		}
		rep.plan = p
		return p.Rider
	})
	return cctx
}

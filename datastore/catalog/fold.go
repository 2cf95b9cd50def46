package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// cursorKey is the record holding a namespace's fold cursor: the
// ChangedPartitions cursor up to which its changes are in the catalog.
func cursorKey(namespace string) string { return "datastore/catalog/" + namespace }

// RecordCursor writes cursor, the cursor a fold of ns's namespace moved
// to, as the fold cursor's record, over known, the value the caller last
// wrote there ("" for none), or, when the record holds anything else (it
// was written by another tree since, or never by this one), over what a
// read finds: the record is where a fold with no cursor of its own
// starts, and every cursor a fold reached is a right place to start (a
// fold skips the rows already at their models' positions), so a write
// over another fold's is harmless. For a caller that lets the folds its
// commits carry leave the record (FoldOptions.CursorOptional) and brings
// it up to date now and then.
func RecordCursor(ctx context.Context, ns *datastore.Store, known, cursor string) error {
	recs, key := ns.Records(), cursorKey(ns.NamespaceName())
	expect := metastore.ExpectValue([]byte(known))
	if known == "" {
		expect = metastore.ExpectAbsent()
	}
	err := recs.CASRecord(ctx, key, expect, []byte(cursor))
	if !errors.Is(err, metastore.ErrConflict) {
		return err
	}
	cur, err := recs.GetRecord(ctx, key)
	switch {
	case errors.Is(err, metastore.ErrNotFound):
		return recs.CASRecord(ctx, key, metastore.ExpectAbsent(), []byte(cursor))
	case err != nil:
		return err
	}
	return recs.CASRecord(ctx, key, metastore.ExpectValue(cur), []byte(cursor))
}

// FoldStats says what one Fold did.
type FoldStats struct {
	// Changed counts the model partitions the namespace's index named as
	// changed; Rows the rows rewritten; Removed the rows removed (models
	// left with no file at all).
	Changed, Rows, Removed int
	// Forwarded counts the rows brought forward from their previous row
	// over the feed; the other rows written were rebuilt from a listing
	// of their model.
	Forwarded int
	// FromCommit counts the rows of Forwarded brought forward over the
	// caller's own commit (FoldOptions.Committed) without a read of the
	// feed.
	FromCommit int
	// Written are the rows written and Gone the models whose rows were
	// removed, for a caller that keeps a copy of the catalog.
	Written []Row
	Gone    []string
	// Committed are the catalog feed positions of the fold's own commit
	// (partition, position), so that a reader that applied Written and
	// Gone need not read them back.
	Committed []datastore.Head
	// Applied is what the fold's commit applied to the catalog store, as
	// Commit returned it, when the fold made exactly one (for
	// CatalogCursorOver); nil otherwise.
	Applied []datastore.Info
	// CursorOver reports that the partitions changed since the cursor
	// were known from the caller's own commit, without a read of the
	// index (datastore.CursorAdvancer).
	CursorOver bool
	// Cursor is the fold cursor the record holds after this fold, as this
	// fold wrote or read it; "" when another fold moved it. A caller may
	// keep it for its next fold (FoldOptions.Cursor).
	Cursor string
}

// Fold brings the catalog rows of ns's namespace up to date with its
// changes since the last fold: it reads the partitions that changed (one
// ChangedPartitions call from the fold's cursor), brings each changed
// model's row forward over the model's changes since the row (or, when
// that cannot be proved exact, lists the model) and rewrites it, all in
// one commit fenced by fence, then moves the cursor by a compare-and-swap.
// Its cost grows with the models that changed, never with the models that
// exist. Run it under the namespace's lock, with the lock's fence: a holder
// that lost the lock writes no row. The cursor's move is fenced too, except
// right after the fold's own fenced commit, where the rows it moves past
// are already in (a holder that lost the lock since may still move it
// there, which is right: the move says only that those rows are written,
// and the compare-and-swap refuses it if a newer fold moved the record
// first). Without a fence (nil) concurrent folds may
// interleave; each is still correct, since a row is computed from the
// model's files or changes, and the cursor is moved only by a
// compare-and-swap.
func Fold(ctx context.Context, ns *datastore.Store, fence *datastore.Fence) (FoldStats, error) {
	return FoldWith(ctx, ns, fence, FoldOptions{})
}

// FoldOptions shape FoldWith.
type FoldOptions struct {
	// Before holds the states of paths of the namespace as the caller
	// read them from the store (StatMany: a tombstone, or a path it did
	// not return, as a Deleted Info), by path. The fold takes such a
	// state, when its position is at or below a row's, as the state
	// that row counted, so that a change of the path since the row
	// replaces it without a listing of the model.
	//
	// That holds only if every row the fold reads was written before
	// the read, so Before is used only with a fence, and the caller
	// must have read the states under the lock that fence is of, after
	// acquiring it: a row is written only by a fold fenced by that
	// lock, so any row another holder wrote after the read would mean
	// the lock changed hands, and this fold's fenced commit is then
	// refused. A sync passes the states its push read (before its
	// commit) to its first fold only: a later fold reads rows this one
	// wrote after the read.
	Before map[string]datastore.Info
	// Cursor is the fold cursor the caller's last fold of the namespace
	// left (FoldStats.Cursor), used instead of reading the cursor's
	// record. It is a guess, never trusted: the record's conditional
	// write expects it (or, when nothing changed since it, the record is
	// read after all), and when the record held anything else (another
	// tree folded since, a record rewritten or removed, a datastore
	// recreated) the fold runs again from the record's own cursor. A
	// stale or foreign value costs that second pass, never a change left
	// out of the catalog.
	Cursor string
	// Committed is what the caller's last commit applied, as Commit
	// returned it (each entry's state with its partition and position).
	// When a model's row is at the position right before the commit's
	// first in the model's partition, and the head the fold reads is the
	// commit's last there, with the commit's positions in it following
	// each other, the partition's changes since the row are exactly the
	// commit's entries: positions are unique in a partition, so no other
	// change can be among them. The fold then brings the row forward over
	// them without reading the feed. Anything else (another writer's
	// commit before or after it, a gap, a row at another position) reads
	// the feed as without it. It is a fact about the feed, not a guess,
	// so it needs no fence; a wrong value (a commit of another datastore)
	// would only fail the checks above or name a change the feed also has.
	Committed []datastore.Info
	// Rows holds catalog rows as the caller read them from the catalog
	// store (StatMany of RowPath, a path it did not return as a Deleted
	// Info), by row path; the fold takes a changed model's row from it
	// instead of reading it. A sync reads its dirty models' rows with the
	// states of Before, in the same request (DynamoDB's read-ahead).
	//
	// Like Before it is used only with a fence and must have been read
	// under the lock that fence is of, after acquiring it: a row is
	// written only by a fold fenced by that lock, so a row another holder
	// wrote since would mean the lock changed hands, and this fold's
	// fenced commit is then refused. A row written meanwhile by a writer
	// that is not such a fold (an unfenced Fold, a hand-made write) is
	// not seen; the fold then writes the row brought forward from the one
	// it was given, which is still the model's row at the head: a row at
	// position P says what the model was at P, and the changes since P are
	// read (or are the caller's commit) whatever P is. Only the first
	// pass of FoldWith uses it.
	Rows map[string]datastore.Info
	// CursorOptional lets a fold the caller's commit carries
	// (PlanFold) leave the cursor's record unwritten where its write is
	// a request of its own (S3; datastore.RecordWrite.Optional): the
	// caller keeps the cursor (FoldStats.Cursor) and writes the record
	// now and then, so that it lags by a few folds. A fold from an older
	// cursor skips every row already at its model's head, so the lag
	// costs reads of the partitions changed since, never a row.
	CursorOptional bool
	// Pulled is a ChangedPartitions read of the namespace the caller made
	// under its lock before its commit (a sync's pull). When the fold's
	// cursor is the one that read started from, the fold takes its
	// answer, moved past the caller's commit (datastore.CursorAdvancer),
	// instead of reading the index again: the fold's cursor and the
	// pull's part whenever something besides this process's commits moved
	// the index since their last read (a lifecycle's drop: the pull reads
	// again, the fold's cursor stays), and the fold read again in the next
	// sync for nothing (issue 31). Not trusted beyond what a read is: the
	// answer is that of a ChangedPartitions of this cursor made at the
	// pull's instant, and the move past the commit is proved by the store,
	// as the fold's own move is; if it cannot be, the fold reads. The
	// caller must have written nothing to the namespace since that read
	// but Committed: a later write (the lifecycle's) would be in neither,
	// and its rows would wait for the next fold.
	Pulled *Pulled
}

// Pulled is a ChangedPartitions call's cursor (From) and answer (Heads,
// Next), for FoldOptions.Pulled.
type Pulled struct {
	From  string
	Heads []datastore.Head
	Next  string
}

// changedOver answers the fold's ChangedPartitions from the cursor old
// without a read, where it can: over the caller's own commit (over: the
// store's ChangedPartitionsOver of it), or as o.Pulled's answer moved past
// that commit, when the fold's cursor is the one the pull started from.
func changedOver(old string, o FoldOptions, over func(cursor string) ([]datastore.Head, string, bool)) ([]datastore.Head, string, bool) {
	if heads, next, ok := over(old); ok {
		return heads, next, true
	}
	p := o.Pulled
	if p == nil || p.From != old {
		return nil, "", false
	}
	if len(o.Committed) == 0 {
		return p.Heads, p.Next, true
	}
	moved, next, ok := over(p.Next)
	if !ok {
		return nil, "", false
	}
	return mergeHeads(p.Heads, moved), next, true
}

// modelHeads returns the heads of heads that are models a row can name.
func modelHeads(heads []datastore.Head) []datastore.Head {
	var models []datastore.Head
	for _, h := range heads {
		if strings.Contains(h.Partition, "/") && validModel(h.Partition) {
			models = append(models, h)
		}
	}
	return models
}

// FoldWith is Fold with options.
func FoldWith(ctx context.Context, ns *datastore.Store, fence *datastore.Fence, o FoldOptions) (FoldStats, error) {
	if fence == nil {
		o.Before, o.Rows = nil, nil // see FoldOptions.Before and Rows
	}
	st, stale, err := fold(ctx, ns, fence, o)
	if err != nil || !stale {
		return st, err
	}
	// The remembered cursor was not the record's: fold again from the
	// record's. The first pass's rows were written after the caller's
	// reads, so Before no longer holds.
	again, _, err := fold(ctx, ns, fence, FoldOptions{})
	st.Changed += again.Changed
	st.FromCommit += again.FromCommit
	st.Rows += again.Rows
	st.Removed += again.Removed
	st.Forwarded += again.Forwarded
	st.Written = append(st.Written, again.Written...)
	st.Gone = append(st.Gone, again.Gone...)
	st.Committed = append(st.Committed, again.Committed...)
	if len(again.Applied) > 0 {
		st.Applied = nil // two commits: neither is the catalog's last alone
	}
	st.Cursor = again.Cursor
	return st, err
}

// fold is one pass of FoldWith; stale reports that o.Cursor was not the
// cursor's record, so that the caller folds again from the record.
func fold(ctx context.Context, ns *datastore.Store, fence *datastore.Fence, o FoldOptions) (st FoldStats, stale bool, err error) {
	cat, err := ns.CatalogStore()
	if err != nil {
		return st, false, err
	}
	recs := ns.Records()
	key := cursorKey(ns.NamespaceName())
	remembered := o.Cursor != ""
	var old []byte
	if remembered {
		old = []byte(o.Cursor)
	} else if old, err = recs.GetRecord(ctx, key); err != nil && !errors.Is(err, metastore.ErrNotFound) {
		return st, false, err
	}
	// Right after the caller's own commit, the partitions changed past
	// the cursor may be known without a read: that commit's, when the
	// cursor is where this process last read the index and nothing else
	// moved it on the commit's shards (datastore.CursorAdvancer).
	over := func(c string) ([]datastore.Head, string, bool) { return ns.ChangedPartitionsOver(c, o.Committed) }
	heads, next, ok := changedOver(string(old), o, over)
	if ok {
		st.CursorOver, err = true, nil // err: the record's absence, read above
	} else {
		heads, next, err = ns.ChangedPartitions(ctx, string(old))
	}
	if errors.Is(err, metastore.ErrInvalidCursor) {
		if remembered {
			return st, true, nil // not this datastore's: read the record
		}
		// A cursor the index no longer knows (a datastore recreated under
		// the record): fold every partition again.
		heads, next, err = ns.ChangedPartitions(ctx, "")
	}
	if err != nil {
		return st, false, err
	}
	models := modelHeads(heads)
	st.Changed = len(models)
	var recorded bool  // the cursor was written with the rows (commitRows)
	var committed bool // this fold's rows were committed, fenced
	if len(models) > 0 {
		entries, written, gone, forwarded, err := foldModels(ctx, ns, cat, models, o.Before, o.Rows, ownChanges(o.Committed), &st.FromCommit)
		if err != nil {
			return st, false, err
		}
		if len(entries) > 0 {
			applied, w, err := commitRows(ctx, cat, fence, entries, key, old, next)
			if err != nil {
				return st, false, err
			}
			recorded, committed = w, true
			st.Applied = applied
			for _, a := range applied {
				st.Committed = append(st.Committed, datastore.Head{Partition: a.Partition, Seq: a.Pos})
			}
		}
		st.Rows, st.Removed, st.Written, st.Gone, st.Forwarded = len(written), len(gone), written, gone, forwarded
	}
	if recorded {
		// The cursor was written with the rows, fenced, from the
		// record's expected value: the guess, if it was one, held.
		st.Cursor = next
		return st, false, nil
	}
	if next == string(old) {
		if remembered {
			// Nothing to write, so no write checks the guess: read.
			rec, err := recs.GetRecord(ctx, key)
			if err != nil && !errors.Is(err, metastore.ErrNotFound) {
				return st, false, err
			}
			if string(rec) != next {
				return st, true, nil
			}
		}
		st.Cursor = next
		return st, false, nil
	}
	expect := metastore.ExpectValue(old)
	if old == nil {
		expect = metastore.ExpectAbsent()
	}
	if fence != nil && !committed {
		err = recs.FencedRecord(ctx, *fence, key, expect, []byte(next))
	} else {
		// Right after this fold's own fenced commit of its rows, the
		// move needs only its compare-and-swap (one write; S3's fenced
		// record write is a read, the write and a read again): the
		// rows up to next are in the catalog, so the move is right
		// whoever holds the lock by now, and a fold of a newer holder
		// that moved the record first makes this one refused (its rows
		// are as new as ours). The fence guards the rows, which a lost
		// holder never writes.
		err = recs.CASRecord(ctx, key, expect, []byte(next))
	}
	if errors.Is(err, metastore.ErrConflict) && !datastore.IsFenceConflict(err) {
		if remembered {
			return st, true, nil // the record was not the guess
		}
		return st, false, nil // another fold moved it: its rows are as new as ours
	}
	if err == nil {
		st.Cursor = next
	}
	return st, false, err
}

// commitRows commits the fold's entries, fenced, carrying the cursor's
// record write (old to next) in the same transaction where the driver can
// (datastore.WithRecordWrite: DynamoDB), which spares the record's own
// fenced write; recorded says it was written. A commit refused only
// because the record was not old (another fold moved it, or the caller's
// remembered cursor was a wrong guess) applied nothing: the rows are then
// committed without it, and the record's own write after them meets the
// same refusal and handles it as without this (FoldWith folds again from
// the record, or leaves the cursor to the fold that moved it).
func commitRows(ctx context.Context, cat *datastore.Store, fence *datastore.Fence, entries []datastore.Entry, key string, old []byte, next string) (applied []datastore.Info, recorded bool, err error) {
	if fence == nil || next == string(old) {
		applied, err = cat.Commit(ctx, fence, entries)
		return applied, false, err
	}
	w := &datastore.RecordWrite{Key: key, Expect: metastore.ExpectValue(old), Value: []byte(next)}
	if old == nil {
		w.Expect = metastore.ExpectAbsent()
	}
	applied, err = cat.Commit(datastore.WithRecordWrite(ctx, w), fence, entries)
	if err != nil && w.Refused() {
		applied, err = cat.Commit(ctx, fence, entries)
		return applied, false, err
	}
	return applied, err == nil && w.Written(), err
}

// foldModels returns the commit entries that rewrite the rows of the
// changed models (and remove those of models left empty): each row
// brought forward from the previous one over the feed (forward), or
// rebuilt from a listing of the model when that cannot be proved exact.
func foldModels(ctx context.Context, ns, cat *datastore.Store, models []datastore.Head, before, given map[string]datastore.Info, own map[string][]datastore.Info, fromCommit *int) (entries []datastore.Entry, written []Row, gone []string, forwarded int, err error) {
	nsName := ns.NamespaceName()
	// The rows the caller read (FoldOptions.Rows); the others read now.
	prevs := map[string]datastore.Info{}
	var rowPaths []string
	for _, h := range models {
		p := rowPath(nsName, h.Partition)
		if info, ok := given[p]; ok {
			if !info.Deleted {
				prevs[p] = info
			}
			continue
		}
		rowPaths = append(rowPaths, p)
	}
	if len(rowPaths) > 0 {
		if planning(ctx) {
			return nil, nil, nil, 0, errWouldRead // plan.go
		}
		read, err := cat.StatMany(ctx, rowPaths)
		if err != nil {
			return nil, nil, nil, 0, err
		}
		for p, info := range read {
			prevs[p] = info
		}
	}
	// Each model's outcome, in the order of models: a row, a removal, or
	// nothing (already folded, or no row and nothing to write).
	type outcome struct {
		h    datastore.Head
		prev *Row
		row  *Row
		list bool // to be listed
	}
	outs := make([]outcome, 0, len(models))
	var defPaths []string
	for _, h := range models {
		o := outcome{h: h}
		var row Row
		var reason string
		var prev *Row
		if info, ok := prevs[rowPath(nsName, h.Partition)]; ok && !info.Deleted {
			// A row that does not decode, or that names another model
			// (damage, or a foreign writer's), is rebuilt from the
			// model's files, as a model with no row is (its Created is
			// then the rebuild's): it must not stop every sync of the
			// namespace, and it is what a fold writes anyway.
			if r, err := decodeRow(info); err == nil && r.Namespace == nsName && r.Model == h.Partition {
				prev = &r
			}
		}
		if prev != nil {
			r := *prev
			if r.Pos >= h.Seq {
				continue // already folded
			}
			o.prev = &r
			var fromOwn bool
			row, reason, fromOwn, err = forward(ctx, ns, h.Partition, h.Seq, r, before, own[h.Partition])
			if err != nil {
				return nil, nil, nil, 0, err
			}
			if fromOwn && reason == "" {
				*fromCommit++
				if testHookFromCommit != nil {
					testHookFromCommit(h.Partition)
				}
			}
		} else {
			// No row yet (a model begun since the last fold): the
			// partition's whole feed, when it has it, is the model.
			var fromOwn bool
			var err error
			row, reason, fromOwn, err = fresh(ctx, ns, h.Partition, h.Seq, ns.Now(), own[h.Partition])
			if err != nil {
				return nil, nil, nil, 0, err
			}
			if fromOwn && reason == "" {
				*fromCommit++
				if testHookFromCommit != nil {
					testHookFromCommit(h.Partition)
				}
			}
		}
		if testHookReason != nil {
			testHookReason(h.Partition, reason)
		}
		if reason == "" {
			o.row = &row
			outs = append(outs, o)
			continue
		}
		// No previous row, or one that cannot be brought forward:
		// list the model and read its definition.
		o.list = true
		defPaths = append(defPaths, DefinitionPath(h.Partition))
		outs = append(outs, o)
	}
	if len(defPaths) > 0 && planning(ctx) {
		return nil, nil, nil, 0, errWouldRead // plan.go: a model to list
	}
	defs, err := ns.StatMany(ctx, defPaths)
	if err != nil {
		return nil, nil, nil, 0, err
	}
	for _, o := range outs {
		h, prev := o.h, o.prev
		row := o.row
		if !o.list {
			forwarded++
		} else {
			files, err := modelFiles(ctx, ns, h.Partition)
			if err != nil {
				return nil, nil, nil, 0, err
			}
			var def *datastore.Info
			if d, ok := defs[DefinitionPath(h.Partition)]; ok {
				def = &d
			}
			if len(files) == 0 && def == nil && (prev == nil || prev.State != Orphaned) {
				if prev != nil {
					entries = append(entries, datastore.Entry{Delete: rowPath(nsName, h.Partition)})
					gone = append(gone, h.Partition)
				}
				continue
			}
			// The head ChangedPartitions gave, read before the
			// listing: the listing holds at least every change up to
			// it, so the next fold reads anything later again.
			r := buildRow(nsName, h.Partition, files, def, prev, h.Seq, ns.Now())
			row = &r
		}
		meta, err := encodeRow(*row)
		if err != nil {
			return nil, nil, nil, 0, err
		}
		staged, err := cat.Upload(ctx, rowPath(nsName, h.Partition), bytes.NewReader(nil), meta)
		if err != nil {
			return nil, nil, nil, 0, fmt.Errorf("catalog row of %s/%s: %w", nsName, h.Partition, err)
		}
		entries = append(entries, datastore.Entry{Put: &staged})
		written = append(written, *row)
	}
	return entries, written, gone, forwarded, nil
}

// testHookReason, when set, is told why each row was listed ("" when it
// was brought forward).
var testHookReason func(model, reason string)

// testHookFromCommit, when set, is told each model whose row was brought
// forward over the caller's own commit (FoldOptions.Committed).
var testHookFromCommit func(model string)

// modelFiles returns the live files of model's partition: the listing of
// its directory without the files of other models in it (a deeper model
// data/TYPE/ID/… of a type with more segments, or a shorter reading: see
// datastore.LayoutModels).
func modelFiles(ctx context.Context, ns *datastore.Store, model string) ([]datastore.Info, error) {
	return ns.ListPartitionAll(ctx, model, "")
}

// validModel reports whether a model partition can have a row: a foreign
// writer can file a path under a partition lake never makes (data/m/1/../..
// names the model m/1/../..), and its definition path must be a valid path
// too (a model near the longest path has none). Such a partition is left
// out of the catalog; a sync skips it and names it.
func validModel(model string) bool {
	return datastore.ValidatePartition(model) == nil && datastore.ValidatePath(DefinitionPath(model)) == nil
}

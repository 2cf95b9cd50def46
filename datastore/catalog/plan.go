package catalog

import (
	"context"
	"errors"
	"slices"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// A fold planned before the commit it folds (issue 31). A sync's first
// fold, right after its commit, brings the rows of the models that commit
// changed forward over the commit's own entries, from the rows the sync
// read ahead under its lock, and moves the cursor over the commit by the
// store's proof (datastore.CursorAdvancer): nothing in it needs a read.
// Planned from what the commit will apply (datastore.CommitFollower), its
// rows and the cursor's record ride in the commit's own transaction where
// the driver can (DynamoDB): one transaction a sync that commits, not
// two. On S3 the commit carries the rows after its own, fenced by its
// check, and writes the cursor's record after them unless the caller lets
// it lag (FoldOptions.CursorOptional; s3fs/follow.go): one read of the lock
// record fewer, and most syncs one write of the record fewer. A plan that would need a read (a row not read ahead, a row not at
// the position right before the commit's, a model to list, a cursor the
// store cannot move without a read) is not made: the fold runs after the
// commit, as before.

// errWouldRead stops a planned fold at its first read.
var errWouldRead = errors.New("lake: the fold needs a read")

type planKey struct{}

// planning reports whether ctx is a planned fold's, which reads nothing.
func planning(ctx context.Context) bool { return ctx.Value(planKey{}) != nil }

// Plan is a fold planned from a commit's predicted result (PlanFold).
type Plan struct {
	// Rider is the fold's commit of the rows and of the cursor's record,
	// for the commit to carry (datastore.CommitFollower).
	Rider *datastore.CommitRider
	stats FoldStats
	seen  int // the entries of the commit planned over
}

// Stats returns, once the Rider was carried, what FoldWith would have
// returned for the fold it made; ok false if it was not carried, or was
// planned over other than the whole commit (applied: what it applied):
// the caller then folds (from the cursor the rider moved the record to,
// if it was carried).
func (p *Plan) Stats(applied []datastore.Info) (FoldStats, bool) {
	if p == nil {
		return FoldStats{}, false
	}
	out, carried := p.Rider.Carried()
	if !carried || len(applied) != p.seen {
		return FoldStats{}, false
	}
	st := p.stats
	st.Applied = out
	for _, a := range out {
		st.Committed = append(st.Committed, datastore.Head{Partition: a.Partition, Seq: a.Pos})
	}
	return st, true
}

// Recorded reports whether the carried fold wrote the cursor's record
// (false where it was not carried, or left the record: on S3 when
// FoldOptions.CursorOptional, or refused).
func (p *Plan) Recorded() bool {
	if p == nil {
		return false
	}
	_, carried := p.Rider.Carried()
	return carried && p.Rider.Record != nil && p.Rider.Record.Written()
}

// Cursor returns the cursor the carried fold moved to ("" if it was not
// carried): the record's new value where the driver wrote the record too
// (Recorded), the caller's to keep either way (a record left behind is a
// lower bound: a fold from it skips the rows already folded).
func (p *Plan) Cursor() string {
	if p == nil {
		return ""
	}
	if _, carried := p.Rider.Carried(); !carried {
		return ""
	}
	return p.stats.Cursor
}

// PlanFold plans the fold of ns's namespace that FoldWith(ctx, ns, fence,
// o) would make right after a commit applying o.Committed, where over
// answers ChangedPartitionsOver of ns as it will stand after that commit
// (datastore.CommitFollower). ok is false when it cannot be planned
// without a read: no fence, no remembered cursor (o.Cursor), a cursor over
// cannot move, or a row that cannot be brought forward over the commit
// from the rows read ahead (o.Rows).
func PlanFold(ctx context.Context, ns *datastore.Store, fence *datastore.Fence, o FoldOptions, over func(cursor string) ([]datastore.Head, string, bool)) (*Plan, bool) {
	if fence == nil || o.Cursor == "" || len(o.Committed) == 0 {
		return nil, false
	}
	cat, err := ns.CatalogStore()
	if err != nil {
		return nil, false
	}
	old := o.Cursor
	heads, next, ok := changedOver(old, o, over) // fold.go, as the fold finds them
	if !ok {
		return nil, false
	}
	models := modelHeads(heads)
	if len(models) == 0 {
		return nil, false
	}
	st := FoldStats{Changed: len(models), CursorOver: true, Cursor: next}
	pctx := context.WithValue(ctx, planKey{}, true)
	entries, written, gone, forwarded, err := foldModels(pctx, ns, cat, models, o.Before, o.Rows, ownChanges(o.Committed), &st.FromCommit)
	if err != nil || len(entries) == 0 {
		return nil, false
	}
	st.Rows, st.Removed, st.Written, st.Gone, st.Forwarded = len(written), len(gone), written, gone, forwarded
	record := &datastore.RecordWrite{Key: cursorKey(ns.NamespaceName()), Expect: metastore.ExpectValue([]byte(old)), Value: []byte(next), Optional: o.CursorOptional}
	r := cat.FollowingCommit(ctx, fence, entries, record)
	if r == nil {
		return nil, false
	}
	return &Plan{Rider: r, stats: st, seen: len(o.Committed)}, true
}

// mergeHeads is a pull's heads and those a commit moved past it: each
// partition once, at the higher position, in the order first seen.
func mergeHeads(pulled, moved []datastore.Head) []datastore.Head {
	byPart := map[string]datastore.Head{}
	var order []string
	for _, h := range append(slices.Clone(pulled), moved...) {
		if _, seen := byPart[h.Partition]; !seen {
			order = append(order, h.Partition)
		}
		if cur, seen := byPart[h.Partition]; !seen || h.Seq >= cur.Seq {
			byPart[h.Partition] = h
		}
	}
	heads := make([]datastore.Head, len(order))
	for i, part := range order {
		heads[i] = byPart[part]
	}
	return heads
}

package dynamofs

import (
	"context"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
)

// A commit carried by a drop's last transaction (issue 31,
// datastore.CommitRider): the lifecycle's removal of a dropped model's
// catalog row, a commit in the catalog's namespace of the same table,
// built as its own Commit builds it (from the read the drop's made for it:
// prefetch.go) and sent with the drop's items instead of in a transaction
// of its own.

// ride is a rider's commit built for one carrying transaction.
type ride struct {
	r     *datastore.CommitRider
	rd    *Driver // the rider's namespace
	items []types.TransactWriteItem
	out   []datastore.Info
	move  *indexMove
}

// prepareRide builds ctx's commit rider for a transaction of d fenced by
// fence whose other items are base (the fence's check not counted), or
// returns nil when it cannot ride: no rider, one carried already, another
// table or the same namespace, another fence, nothing to change, a commit
// that must settle or stage first, or items that would not fit or would
// name an item twice. The rider's own fence check is left out: the
// carrying transaction checks the same fence.
func (d *Driver) prepareRide(ctx context.Context, fence *datastore.Fence, base []types.TransactWriteItem) *ride {
	return d.prepareRideOf(ctx, datastore.CommitRiderOf(ctx), fence, base)
}

// prepareRideOf is prepareRide of rider r (a CommitFollower's, or the one
// ctx offers), with the record write r carries (r.Record) among its items.
func (d *Driver) prepareRideOf(ctx context.Context, r *datastore.CommitRider, fence *datastore.Fence, base []types.TransactWriteItem) *ride {
	if !r.RidesWith(fence) {
		return nil
	}
	rd, ok := datastore.UnwrapDriver(r.Driver).(*Driver)
	if !ok || rd.shared != d.shared || rd.pfx == d.pfx {
		return nil
	}
	entries := r.Entries()
	items, roles, out, move, err := rd.buildCommit(ctx, r.Fence, entries, rd.partsOf(entries), r.Now, "")
	if err != nil || len(out) == 0 {
		return nil
	}
	var kept []types.TransactWriteItem
	for i, it := range items {
		if roles[i] != roleFence {
			kept = append(kept, it)
		}
	}
	if r.Record != nil {
		it, err := recordWriteItem(d.table, r.Record)
		if err != nil {
			return nil
		}
		kept = append(kept, it)
	}
	if 1+len(base)+len(kept) > maxTxItems {
		return nil
	}
	seen := map[string]bool{itemID(recordKey(fence.Key)): true}
	for _, it := range append(slices.Clip(base), kept...) {
		id := itemID(writeKey(it))
		if seen[id] {
			return nil
		}
		seen[id] = true
	}
	return &ride{r: r, rd: rd, items: kept, out: out, move: move}
}

// carried records, once the carrying transaction applied, what the
// rider's commit applied, as the rider's own Commit would have.
func (rd *ride) carried() {
	if rd.move != nil {
		rd.rd.seen.wrote(rd.rd.pfx, rd.move.after) // predict.go
	}
	rd.rd.moves.Record(rd.rd.pfx, rd.out, rd.move) // cursorover.go
	if rd.r.Record != nil {
		rd.r.Record.MarkWritten()
	}
	rd.r.MarkCarried(rd.out)
}

// writeKey returns the key of the item a transaction's write names.
func writeKey(w types.TransactWriteItem) item {
	switch {
	case w.Put != nil:
		return key(getS(w.Put.Item, attrPK), getS(w.Put.Item, attrSK))
	case w.Update != nil:
		return w.Update.Key
	case w.Delete != nil:
		return w.Delete.Key
	case w.ConditionCheck != nil:
		return w.ConditionCheck.Key
	}
	return nil
}

package dynamofs

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// dropRoom is the most file items one drop transaction carries: 100 items
// less the fence's ConditionCheck and the head's delete and registry's
// update, for which the last transaction keeps room (and one item to
// spare, for the claim a model's drop removes; more claims take more).
const dropRoom = 100 - 1 - 2

// DropPartition reads the partition's head, then its files (one Query page
// at a time) and removes them in transactions of at most 100 items, each
// with the fence's ConditionCheck: each file's delete under a condition on
// the position it was read with, with its tombstone's purge entry deleted
// or its live version recorded for Reclaim as replaced at now. The last
// transaction also deletes the head (which is the partition's index entry)
// under a condition on the seq read first, and DELETEs the partition from
// its registry shard's set. A commit racing the drop therefore fails one of
// its conditions, and the drop returns an error matching
// metastore.ErrConflict instead of losing that commit; a crash or conflict
// leaves it partly done, and another call finishes it. A model's head is
// read with those of the partitions it claimed (one BatchGetItem), and the
// last transaction also removes it from their subs (forgetClaims).
func (d *Driver) DropPartition(ctx context.Context, fence *datastore.Fence, partition string, now time.Time) (datastore.DropStats, error) {
	st, _, err := d.drop(ctx, fence, partition, "", now)
	return st, err
}

var _ datastore.GuardedDropper = (*Driver)(nil)

// DropPartitionIfDeleted implements datastore.GuardedDropper: the drop's
// Query of the partition's files says whether guard is live (the files
// come in path order: once the Query passes guard's place, it is known),
// and nothing is removed before it does. guard's item, deleted, is
// removed under a condition on its position as every file is, and the
// head under one on its seq: a commit that defines it again after the
// Query makes the drop fail its condition.
func (d *Driver) DropPartitionIfDeleted(ctx context.Context, fence *datastore.Fence, partition, guard string, now time.Time) (datastore.DropStats, bool, error) {
	return d.drop(ctx, fence, partition, guard, now)
}

// drop is DropPartition, unless guard ("": none) is a live file of
// partition: then it removes nothing and dropped is false.
func (d *Driver) drop(ctx context.Context, fence *datastore.Fence, partition, guard string, now time.Time) (st datastore.DropStats, dropped bool, err error) {
	head, forget, err := d.dropHeads(ctx, partition) // claims.go
	if err != nil {
		return st, false, err
	}
	room := dropRoom - max(0, len(forget)-1)
	var batch []types.TransactWriteItem
	var pending datastore.DropStats
	flush := func(rd *ride) error {
		if err := d.dropTransact(ctx, fence, partition, batch, rd); err != nil {
			return err
		}
		st.Files += pending.Files
		st.Tombstones += pending.Tombstones
		batch, pending = batch[:0], datastore.DropStats{}
		return nil
	}
	place := func(r removal) error {
		if len(batch)+len(r.ops) > room {
			if err := flush(nil); err != nil {
				return err
			}
		}
		batch = append(batch, r.ops...)
		if r.tomb {
			pending.Tombstones++
		} else {
			pending.Files++
		}
		return nil
	}
	// The removals read before guard's place in the path order are held
	// until the Query reaches it: nothing goes before guard is known.
	var held []removal
	decided, live := guard == "", false
	err = d.dropFiles(ctx, partition, now, func(r removal) error {
		if !decided {
			switch {
			case r.path == guard:
				decided, live = true, !r.tomb
			case r.path > guard:
				decided = true
			default:
				held = append(held, r)
				return nil
			}
			if live {
				return errGuardLive
			}
			for _, h := range held {
				if err := place(h); err != nil {
					return err
				}
			}
			held = nil
		}
		return place(r)
	})
	if errors.Is(err, errGuardLive) {
		return datastore.DropStats{}, false, nil
	}
	if err != nil {
		return st, false, err
	}
	for _, h := range held { // guard absent, after every path
		if err := place(h); err != nil {
			return st, false, err
		}
	}
	if head != nil {
		seq := getN(head, "seq")
		cond := expression.AttributeNotExists(expression.Name("seq"))
		if seq != 0 {
			cond = expression.Name("seq").Equal(expression.Value(seq))
		}
		c, err := build(expression.NewBuilder().WithCondition(cond))
		if err != nil {
			return st, false, err
		}
		batch = append(batch, types.TransactWriteItem{Delete: &types.Delete{TableName: &d.table, Key: d.headKey(partition),
			ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values()}})
	} else {
		// No head read: the partition must still have none with a seq
		// when it leaves the registry, or a commit that landed since
		// (registering it in its transaction) would be left live and
		// unregistered (registry.go).
		w, err := d.noSeqCheck(partition)
		if err != nil {
			return st, false, err
		}
		batch = append(batch, w)
	}
	u, err := build(expression.NewBuilder().WithUpdate(expression.Delete(expression.Name("parts"),
		expression.Value(&types.AttributeValueMemberSS{Value: []string{partition}}))))
	if err != nil {
		return st, false, err
	}
	batch = append(batch, types.TransactWriteItem{Update: &types.Update{TableName: &d.table, Key: d.registryKey(shard(partition)),
		UpdateExpression: u.Update(), ExpressionAttributeNames: u.Names(), ExpressionAttributeValues: u.Values()}})
	batch = append(batch, forget...)
	// Forget the registration before the registry loses it and again
	// after: a commit of this process that follows the drop registers the
	// partition again rather than trust a cache the drop made stale.
	d.registered.Delete(d.regKey(partition))
	// The last transaction carries the commit ctx offers, where it can
	// (rider.go): the dropped model's catalog row removed with it.
	err = flush(d.prepareRide(ctx, fence, batch))
	d.registered.Delete(d.regKey(partition))
	return st, err == nil, err
}

// removal is what removes one file of a dropped partition: its path, the
// transaction's items (its delete, conditioned on its position, and its
// tombstone's purge entry's delete or its live version's reclaim entry),
// and whether it is a tombstone.
type removal struct {
	path string
	ops  []types.TransactWriteItem
	tomb bool
}

// errGuardLive stops a guarded drop's read: its guard is a live file.
var errGuardLive = errors.New("lake: the drop's guard is live")

// dropFiles queries the partition's files, in path order, and calls add
// with the removal of each.
func (d *Driver) dropFiles(ctx context.Context, partition string, now time.Time, add func(removal) error) error {
	kc := expression.Key(attrPK).Equal(expression.Value(d.filePK(partition)))
	proj := expression.NamesList(expression.Name(attrSK), expression.Name(attrPos), expression.Name("del"),
		expression.Name("ver"), expression.Name("chunks"), expression.Name("t"))
	e, err := build(expression.NewBuilder().WithKeyCondition(kc).WithProjection(proj))
	if err != nil {
		return err
	}
	in := &dynamodb.QueryInput{KeyConditionExpression: e.KeyCondition(), ProjectionExpression: e.Projection(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}
	for {
		page, err := d.query(ctx, in)
		if err != nil {
			return err
		}
		for _, it := range page.Items {
			path := getS(it, attrSK)
			c, err := build(expression.NewBuilder().WithCondition(expression.Name(attrPos).Equal(expression.Value(getN(it, attrPos)))))
			if err != nil {
				return err
			}
			ops := []types.TransactWriteItem{{Delete: &types.Delete{TableName: &d.table, Key: key(d.filePK(partition), path),
				ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values()}}}
			tomb := getBool(it, "del")
			switch {
			case tomb:
				// The purge entry's key is the tombstone's time and path,
				// both on the file item: no read needed to find it.
				ops = append(ops, types.TransactWriteItem{Delete: &types.Delete{TableName: &d.table,
					Key: d.tombKey(path, time.Unix(0, getI(it, "t")))}})
			case getN(it, "chunks") > 0:
				g := d.garbageKey(getS(it, "ver"), now)
				g["chunks"] = num(getN(it, "chunks"))
				ops = append(ops, types.TransactWriteItem{Put: &types.Put{TableName: &d.table, Item: g}})
			}
			if err := add(removal{path: path, ops: ops, tomb: tomb}); err != nil {
				return err
			}
		}
		if page.LastEvaluatedKey == nil {
			return nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// dropTransact sends ops behind the fence's ConditionCheck in one
// TransactWriteItems, with rd's items if rd is not nil, and explains a
// failed condition: the fence, or a commit that changed the partition since
// the drop read it. A transaction that failed only on rd's conditions (the
// rider's paths changed since its read) is sent again without them: the
// rider is then not carried, and its caller commits it.
func (d *Driver) dropTransact(ctx context.Context, fence *datastore.Fence, partition string, ops []types.TransactWriteItem, rd *ride) error {
	var items []types.TransactWriteItem
	if fence != nil {
		c, err := build(expression.NewBuilder().WithCondition(expression.Name("v").Equal(expression.Value(fence.Token))))
		if err != nil {
			return err
		}
		items = append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: &d.table, Key: recordKey(fence.Key),
			ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values()}})
	}
	items = append(items, ops...)
	own := len(items)
	if rd != nil {
		items = append(items, rd.items...)
	}
	err := d.transact(ctx, items)
	failed, ok := failedIndexes(err)
	switch {
	case err == nil:
		if rd != nil {
			rd.carried()
		}
		return nil
	case rd != nil && ok && len(failed) > 0 && !slices.ContainsFunc(failed, func(i int) bool { return i < own }):
		return d.dropTransact(ctx, fence, partition, ops, nil)
	case !ok || len(failed) == 0:
		return d.classify(err, partition)
	case fence != nil && failed[0] == 0:
		return metastore.Conflict(fence.Key, datastore.FenceReason)
	default:
		return metastore.Conflict(partition, "a commit changed the partition while it was being dropped; drop it again")
	}
}

package dynamofs

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The repairs of lake data check --repair beyond the registry and commit
// records (check.go): heads, shard counters and the feed are derived from
// a partition's file items; an item that cannot be derived is moved aside
// under a quarantine key. Every write is conditional on what the check
// read, so a repair racing a writer fails (and is reported unrepaired)
// rather than overwriting it; the caller holds the namespace's lock.

// quarantineKey is where check --repair moves item it: q#MS (the check's
// time), sort key the item's pk/sk, so that two items never collide and an
// operator finds each by its old key. No reader of the namespace reads q#.
func (d *Driver) quarantineKey(now time.Time, it item) item {
	return key(d.pk("q#"+ms(now)), getS(it, attrPK)+"/"+getS(it, attrSK))
}

// quarantine moves it aside to its quarantine key: one transaction puts
// the copy (its attributes, the position kept as from_pos so that the copy
// is in no position index, the old key as from_pk and from_sk) and deletes
// the item if its position is still the one read.
func (d *Driver) quarantine(ctx context.Context, it item, to item) error {
	cp := item{}
	for k, v := range it {
		if k != attrPK && k != attrSK && k != attrPos {
			cp[k] = v
		}
	}
	if v, ok := it[attrPos]; ok {
		cp["from_pos"] = v
	}
	cp["from_pk"], cp["from_sk"] = it[attrPK], it[attrSK]
	cp[attrPK], cp[attrSK] = to[attrPK], to[attrSK]
	put, err := build(expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(attrPK))))
	if err != nil {
		return err
	}
	del, err := build(expression.NewBuilder().WithCondition(sameAttr(attrPos, it[attrPos])))
	if err != nil {
		return err
	}
	err = d.transact(ctx, []types.TransactWriteItem{
		{Put: &types.Put{TableName: &d.table, Item: cp, ConditionExpression: put.Condition(), ExpressionAttributeNames: put.Names()}},
		{Delete: &types.Delete{TableName: &d.table, Key: key(getS(it, attrPK), getS(it, attrSK)), ConditionExpression: del.Condition(),
			ExpressionAttributeNames: del.Names(), ExpressionAttributeValues: del.Values()}},
	})
	return d.classify(err, getS(it, attrPK)+"/"+getS(it, attrSK))
}

// sameAttr is the condition that attribute name still holds v (nil: is
// absent), whatever its type: a foreign writer's value is compared as it
// was read.
func sameAttr(name string, v types.AttributeValue) expression.ConditionBuilder {
	if v == nil {
		return expression.AttributeNotExists(expression.Name(name))
	}
	return expression.Name(name).Equal(expression.Value(v))
}

// reindex writes part's head at seq and moves its index entry to the next
// position of its shard (so that ChangedPartitions reports the partition),
// in one transaction with extra. h is the head as read (nil: none, created
// here); with resetFloor its floor is set to seq too: nothing says which
// tombstones below were purged, so a puller behind it resyncs.
func (d *Driver) reindex(ctx context.Context, part string, h item, seq uint64, resetFloor bool, extra ...types.TransactWriteItem) error {
	sh := shard(part)
	n, err := d.getItem(ctx, d.counterKey(sh))
	if err != nil {
		return err
	}
	next := getN(n, "n") + 1
	u := expression.Set(expression.Name("seq"), expression.Value(seq)).Set(expression.Name(attrPos), expression.Value(next))
	if resetFloor {
		u = u.Set(expression.Name("floor"), expression.Value(seq))
	}
	cond := expression.AttributeNotExists(expression.Name(attrPK))
	if h != nil {
		cond = sameAttr("seq", h["seq"])
	}
	he, err := build(expression.NewBuilder().WithCondition(cond).WithUpdate(u))
	if err != nil {
		return err
	}
	ne, err := build(expression.NewBuilder().WithCondition(sameAttr("n", n["n"])).WithUpdate(expression.Set(expression.Name("n"), expression.Value(next))))
	if err != nil {
		return err
	}
	items := []types.TransactWriteItem{
		{Update: &types.Update{TableName: &d.table, Key: d.headKey(part), UpdateExpression: he.Update(), ConditionExpression: he.Condition(),
			ExpressionAttributeNames: he.Names(), ExpressionAttributeValues: he.Values()}},
		{Update: &types.Update{TableName: &d.table, Key: d.counterKey(sh), UpdateExpression: ne.Update(), ConditionExpression: ne.Condition(),
			ExpressionAttributeNames: ne.Names(), ExpressionAttributeValues: ne.Values()}},
	}
	return d.classify(d.transact(ctx, append(items, extra...)), part)
}

// reposition gives file item it of part the partition's next position: a
// path at no position or at another path's is seen by no pull; moved to a
// new one, every puller reads it again.
func (d *Driver) reposition(ctx context.Context, part string, it item) error {
	h, err := d.getItem(ctx, d.headKey(part))
	if err != nil {
		return err
	}
	seq := getN(h, "seq") + 1
	e, err := build(expression.NewBuilder().WithCondition(sameAttr(attrPos, it[attrPos])).WithUpdate(expression.Set(expression.Name(attrPos), expression.Value(seq))))
	if err != nil {
		return err
	}
	return d.reindex(ctx, part, h, seq, false, types.TransactWriteItem{Update: &types.Update{TableName: &d.table,
		Key: key(getS(it, attrPK), getS(it, attrSK)), UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}})
}

// raiseCounter raises shard sh's counter to at least to: a head whose
// index position is beyond it is missed by ChangedPartitions.
func (d *Driver) raiseCounter(ctx context.Context, sh string, to uint64) error {
	n, err := d.getItem(ctx, d.counterKey(sh))
	if err != nil {
		return err
	}
	if getN(n, "n") >= to {
		return nil
	}
	e, err := build(expression.NewBuilder().WithCondition(sameAttr("n", n["n"])).WithUpdate(expression.Set(expression.Name("n"), expression.Value(to))))
	if err != nil {
		return err
	}
	err = d.transact(ctx, []types.TransactWriteItem{{Update: &types.Update{TableName: &d.table, Key: d.counterKey(sh), UpdateExpression: e.Update(),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}}})
	return d.classify(err, "shard counter "+sh)
}

// forgetHeadAttr removes attribute attr of part's head (attrPrev, its
// earlier index positions: prevpos.go; attrRecent, its recent paths:
// recentpaths.go), conditional on the head being as read.
func (d *Driver) forgetHeadAttr(ctx context.Context, part, attr string) error {
	h, err := d.getItem(ctx, d.headKey(part))
	if err != nil || h == nil || h[attr] == nil {
		return err
	}
	e, err := build(expression.NewBuilder().WithCondition(sameAttr("seq", h["seq"]).And(sameAttr(attrPos, h[attrPos]))).
		WithUpdate(expression.Remove(expression.Name(attr))))
	if err != nil {
		return err
	}
	err = d.transact(ctx, []types.TransactWriteItem{{Update: &types.Update{TableName: &d.table, Key: d.headKey(part), UpdateExpression: e.Update(),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}}})
	return d.classify(err, "head of "+part)
}

package dynamofs

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
)

// withRecordWrite appends to a fenced commit's transaction the record write
// ctx carries (datastore.WithRecordWrite), if any and if it fits: a Put of
// the record conditioned on what it expects, in the same transaction as the
// fence's check, so the record is written exactly when the commit is, and
// only by the lock's holder. A staged commit (tx set), an unfenced one, or
// a record that is the fence's own never carries it: the caller writes the
// record itself, as it would without it.
func (d *Driver) withRecordWrite(ctx context.Context, fence *datastore.Fence, tx string, items []types.TransactWriteItem, roles []role) ([]types.TransactWriteItem, []role, *datastore.RecordWrite, error) {
	w := datastore.RecordWriteOf(ctx)
	if w == nil || fence == nil || tx != "" || w.Key == fence.Key || w.Key == datastore.LayoutKey || len(items)+1 >= maxTxItems {
		return items, roles, nil, nil
	}
	it, err := recordWriteItem(d.table, w)
	if err != nil {
		return nil, nil, nil, err
	}
	return append(items, it), append(roles, roleRecord), w, nil
}

// recordWriteItem is w as a transaction's item of table: a Put of the
// record conditioned on what it expects.
func recordWriteItem(table string, w *datastore.RecordWrite) (types.TransactWriteItem, error) {
	c, err := build(expression.NewBuilder().WithCondition(expectCond(w.Expect)))
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	it := recordKey(w.Key)
	it["v"] = &types.AttributeValueMemberB{Value: w.Value}
	return types.TransactWriteItem{Put: &types.Put{TableName: &table, Item: it, ConditionExpression: c.Condition(),
		ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values()}}, nil
}

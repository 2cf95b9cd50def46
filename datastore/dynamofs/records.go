package dynamofs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
)

// recordKey files a lock record under its first two segments ("rec/NS"),
// so that the records of one namespace are one item collection a Query
// lists, and two namespaces share none.
func recordKey(k string) item {
	return key("k#"+recordDir(k), k)
}

func recordDir(k string) string {
	first, rest, _ := strings.Cut(k, "/")
	second, _, _ := strings.Cut(rest, "/")
	if second == "" {
		return first
	}
	return first + "/" + second
}

// GetRecord reads a lock record, strongly consistent.
func (d *Driver) GetRecord(ctx context.Context, k string) ([]byte, error) {
	it, ahead := d.aheadRecord(ctx, k) // readahead.go
	if !ahead {
		var err error
		if it, err = d.getItem(ctx, recordKey(k)); err != nil {
			return nil, err
		}
	}
	if it == nil {
		return nil, metastore.NotFound(k)
	}
	return getB(it, "v"), nil
}

func expectCond(expect metastore.Expect) expression.ConditionBuilder {
	if expect.Absent() {
		return expression.AttributeNotExists(expression.Name(attrPK))
	}
	return expression.Name("v").Equal(expression.Value(expect.Value()))
}

// CASRecord writes a lock record with one conditional PutItem, exactly
// once (ddb.Writer.PutOnce): the item carries the write's token ("w"), and
// after an attempt whose response was lost the retry reads back instead of
// re-checking expect. So a lock acquisition whose response was lost is
// recognised as the holder's own (nil), never called a conflict; if the
// record no longer carries the token, the outcome is unknown
// (metastore.ErrUnavailable), which the lock reads back (issue 29). A
// failed condition on an attempt that nothing ambiguous preceded is a
// conflict.
func (d *Driver) CASRecord(ctx context.Context, k string, expect metastore.Expect, value []byte) error {
	it := recordKey(k)
	it["v"] = &types.AttributeValueMemberB{Value: value}
	cond := expectCond(expect)
	w := ddb.Writer{API: d.api, Retryer: d.retryer, Meter: &d.meter.Meter}
	err := w.PutOnce(ctx, ddb.Put{Table: d.table, Item: it, Condition: &cond, What: fmt.Sprintf("record %q", k)})
	switch {
	case err == nil:
		d.meter.count(&d.meter.s.ItemsWritten)
		return nil
	case errors.Is(err, ddb.ErrUnknownOutcome):
		return err
	}
	return d.classify(err, k)
}

// DeleteRecord deletes a lock record if it holds exactly expected.
func (d *Driver) DeleteRecord(ctx context.Context, k string, expected []byte) error {
	c, err := build(expression.NewBuilder().WithCondition(expectCond(metastore.ExpectValue(expected))))
	if err != nil {
		return err
	}
	err = d.transact(ctx, []types.TransactWriteItem{{Delete: &types.Delete{TableName: &d.table, Key: recordKey(k),
		ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values()}}})
	if idx, ok := failedIndexes(err); ok && len(idx) > 0 {
		return metastore.Conflict(k, "record differs from expected")
	}
	return d.classify(err, k)
}

// ListRecords queries the directory of prefix.
func (d *Driver) ListRecords(ctx context.Context, prefix string) ([]metastore.Item, error) {
	kc := expression.Key(attrPK).Equal(expression.Value("k#" + recordDir(prefix))).And(expression.Key(attrSK).BeginsWith(prefix))
	e, err := build(expression.NewBuilder().WithKeyCondition(kc))
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}
	var out []metastore.Item
	for {
		page, err := d.query(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			out = append(out, metastore.Item{Key: getS(it, attrSK), Value: getB(it, "v")})
		}
		if page.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	slices.SortFunc(out, func(a, b metastore.Item) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// FencedRecord writes a record under a ConditionCheck on the fence, in one
// TransactWriteItems.
func (d *Driver) FencedRecord(ctx context.Context, fence datastore.Fence, k string, expect metastore.Expect, value []byte) error {
	f, err := build(expression.NewBuilder().WithCondition(expression.Name("v").Equal(expression.Value(fence.Token))))
	if err != nil {
		return err
	}
	c, err := build(expression.NewBuilder().WithCondition(expectCond(expect)))
	if err != nil {
		return err
	}
	it := recordKey(k)
	it["v"] = &types.AttributeValueMemberB{Value: value}
	err = d.transact(ctx, []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{TableName: &d.table, Key: recordKey(fence.Key), ConditionExpression: f.Condition(),
			ExpressionAttributeNames: f.Names(), ExpressionAttributeValues: f.Values()}},
		{Put: &types.Put{TableName: &d.table, Item: it, ConditionExpression: c.Condition(),
			ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values()}},
	})
	if idx, ok := failedIndexes(err); ok && len(idx) > 0 {
		if idx[0] == 0 {
			return metastore.Conflict(fence.Key, datastore.FenceReason)
		}
		return metastore.Conflict(k, "record differs from expected")
	}
	return d.classify(err, k)
}

package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
)

// single reports whether m, planned in mode md, changes exactly one item and
// checks nothing else, so that one conditional PutItem can apply it: a Put or
// CAS in a mode that writes one table alone. A delete is not (a retried
// DeleteItem leaves no item to carry the token, see putItem), nor a guarded
// mutation (two items).
func single(md mode, m mutation) bool {
	return (md == modeV1 || md == modeV2) && !m.del && m.guard == nil
}

// putItem applies a Put or CAS of one item with one conditional PutItem
// (one write unit per KB, where a transaction costs two), stamping the item
// with the write's token. Without DynamoDB's idempotency token, the retry
// rules keep the guarantees of transact:
//
//   - A failed condition on a first attempt, or on one that followed only
//     certain refusals (throttling, an answered 5xx), is a conflict.
//   - After an ambiguous attempt (lost response, reset), every retry is
//     conditioned on the item carrying this write's token: it can only
//     confirm the write's own earlier attempt (rewriting it identically),
//     never apply the write a second time. Should the condition fail, the
//     old item DynamoDB returns lacks the token: the earlier attempt may
//     have applied and been overwritten since, or never arrived, so the
//     outcome is unknown (ErrUnavailable), never a conflict.
//
// A retry under the write's own condition could apply it twice: a Put over
// a later writer's value (that value would vanish and the Put reappear), a
// CAS after another writer put the expected value back (A→B by us, B→A by
// them, A→B by our retry): neither is linearizable. The price is that a
// write whose request (not response) was lost is reported unknown too.
func (d *Driver) putItem(ctx context.Context, t tbl, m mutation) error {
	token := newToken()
	item := d.keyIn(t, m.key)
	item[attrValue] = &types.AttributeValueMemberB{Value: m.value}
	item[attrWrite] = &types.AttributeValueMemberS{Value: token}
	item[attrTime] = &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().UnixMilli(), 10)}
	if at, ok := metastore.ExpiryFrom(ctx); ok {
		// The caller's TTL backstop (metastore.WithExpiry).
		item[attrExpires] = &types.AttributeValueMemberN{Value: strconv.FormatInt(ttlOf(at), 10)}
	}
	if size := itemSize(item); size > maxItemBytes {
		return fmt.Errorf("%w: item %q would be %d bytes, DynamoDB's limit is %d", metastore.ErrInvalidValue, m.key, size, maxItemBytes)
	}
	first, err := d.putInput(t, item, m.expect, "")
	if err != nil {
		return err
	}
	in := first
	ambiguous := false
	err = d.retry(ctx, func(int) error {
		if ambiguous && in == first {
			// From now on the write may only confirm its own attempt.
			confirm, err := d.putInput(t, item, nil, token)
			if err != nil {
				return err
			}
			in = confirm
		}
		out, err := d.api.PutItem(ctx, in)
		if err == nil {
			d.meter.request("PutItem", 0, 0, ccOf(out.ConsumedCapacity)...)
			return nil
		}
		d.meter.request("PutItem", 0, 0)
		if !ddb.SurelyNotApplied(err) {
			ambiguous = true
		}
		return err
	})
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if ambiguous && errors.As(err, &ccf) {
		// The confirming retry failed: the item (returned as it is now)
		// does not carry this write's token.
		return fmt.Errorf("%w: the outcome of a write to %q is unknown after a lost response (the item does not carry the write's token: the earlier attempt never arrived, or applied and was overwritten since)", metastore.ErrUnavailable, m.key)
	}
	return d.classify(err, d.tableName(t), m.key)
}

// putInput is the PutItem of item conditioned on expect (nil: none) or,
// with ownToken set, on the item carrying that token.
func (d *Driver) putInput(t tbl, item map[string]types.AttributeValue, expect *metastore.Expect, ownToken string) (*dynamodb.PutItemInput, error) {
	in := &dynamodb.PutItemInput{
		TableName:                           aws.String(d.tableName(t)),
		Item:                                item,
		ReturnConsumedCapacity:              types.ReturnConsumedCapacityTotal,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	var cond *expression.ConditionBuilder
	switch {
	case ownToken != "":
		c := expression.Name(attrWrite).Equal(expression.Value(&types.AttributeValueMemberS{Value: ownToken}))
		cond = &c
	case expect != nil:
		cond = condExpect(*expect)
	}
	if cond == nil {
		return in, nil
	}
	e, err := conditionExpr(*cond)
	if err != nil {
		return nil, err
	}
	in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.Condition(), e.Names(), e.Values()
	return in, nil
}

// conditionExpr builds a condition alone.
func conditionExpr(c expression.ConditionBuilder) (expression.Expression, error) {
	e, err := expression.NewBuilder().WithCondition(c).Build()
	if err != nil {
		return e, fmt.Errorf("lake: build condition: %w", err)
	}
	return e, nil
}

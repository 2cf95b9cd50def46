package dynamostore

import (
	"bytes"
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

// tbl names one of the two physical tables.
type tbl int

const (
	tV1 tbl = iota
	tV2
)

func (d *Driver) tableName(t tbl) string {
	if t == tV2 {
		return d.v2
	}
	return d.v1
}

// keyIn returns the primary key of a logical key (user or control) in t.
func (d *Driver) keyIn(t tbl, key string) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: key}}
	if t == tV2 {
		bucket := controlBucket
		if !metastore.IsControlKey(key) {
			bucket = d.params.BucketOf(key)
		}
		k[attrBucket] = &types.AttributeValueMemberS{Value: bucket}
	}
	return k
}

// kind is what a transaction item does.
type kind int

const (
	kPut kind = iota
	kDelete
	kCheck
)

// role is why an item is in a transaction; it decides what a failed
// condition on it means.
type role int

const (
	roleTarget  role = iota // the key the caller mutates: a failed condition is a conflict
	roleGuard               // GuardedMutate's guard: a conflict
	roleCopy                // the non-authoritative copy in dual mode: divergence, fail closed
	roleBarrier             // the write barrier: the state moved on, refresh and retry
	roleState               // a migration record: the state moved on
	roleMirror              // v1 mirror after finalization: unconditional
)

// txItem is one item of a TransactWriteItems.
type txItem struct {
	t tbl
	// bucket, when set, is the v2 partition of a control item whose key is
	// not a control key (a change-log entry); otherwise keyIn decides.
	bucket string
	key    string
	// expires, when positive, is the item's TTL (unix seconds).
	expires int64
	kind    kind
	value   []byte
	cond    *expression.ConditionBuilder
	role    role
}

// Conditions.
func condAbsent() *expression.ConditionBuilder {
	c := expression.AttributeNotExists(expression.Name(attrPK))
	return &c
}

func condPresent() *expression.ConditionBuilder {
	c := expression.AttributeExists(expression.Name(attrPK))
	return &c
}

func condEquals(v []byte) *expression.ConditionBuilder {
	c := expression.Name(attrValue).Equal(expression.Value(&types.AttributeValueMemberB{Value: v}))
	return &c
}

// condExpect is the authority's condition for expect.
func condExpect(e metastore.Expect) *expression.ConditionBuilder {
	if e.Absent() {
		return condAbsent()
	}
	return condEquals(e.Value())
}

// condCopy is the condition on the non-authoritative copy in dual mode: it
// may be missing (a key written before the upgrade), or a leftover lake
// wrote before the current dual period began (staleBefore: a copy from a
// dual period that was rolled back, which v1 has since moved past), but
// otherwise it must hold what the authority holds; anything else fails
// closed.
func condCopy(e metastore.Expect, staleBefore time.Time) *expression.ConditionBuilder {
	c := expression.AttributeNotExists(expression.Name(attrPK))
	if !e.Absent() {
		c = c.Or(expression.Name(attrValue).Equal(expression.Value(&types.AttributeValueMemberB{Value: e.Value()})))
	}
	if !staleBefore.IsZero() {
		ms := strconv.FormatInt(staleBefore.UnixMilli(), 10)
		c = c.Or(expression.Name(attrTime).LessThan(expression.Value(&types.AttributeValueMemberN{Value: ms})))
	}
	return &c
}

// ErrDiverged is returned in dual mode when the v2 copy of a key differs
// from what v1, the authority, holds: the mutation fails closed, changing
// neither. `lake dynamo-migrate repair` (or `backfill --again`) converges v2
// to v1; retry after it. It is metastore.ErrDiverged, so that it crosses a
// node with its meaning (and matches metastore.ErrUnavailable too).
var ErrDiverged = metastore.ErrDiverged

// errBarrier: a dual mutation found the write barrier held.
var errBarrier = errors.New("lake: write barrier held")

// ErrStateMoved is returned by Primitives.Transition when a migration
// record changed since it was read; it matches metastore.ErrConflict.
var ErrStateMoved = fmt.Errorf("%w: the migration state changed concurrently", metastore.ErrConflict)

// transact applies items in one TransactWriteItems under one idempotency
// token, retrying as the retryer allows, and resolves an ambiguous outcome
// with the old items DynamoDB returns on a cancellation (see the package
// doc). Items of role roleTarget that put a value carry the token in "w".
func (d *Driver) transact(ctx context.Context, items []txItem) error {
	_, err := d.transactUnits(ctx, items)
	return err
}

// transactUnits is transact that also returns the write units DynamoDB
// reported for the attempt that succeeded (0 when it did not say).
func (d *Driver) transactUnits(ctx context.Context, items []txItem) (float64, error) {
	token := ddb.NewToken()
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	in := &dynamodb.TransactWriteItemsInput{
		ClientRequestToken:     aws.String(token),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}
	hint, hinted := metastore.ExpiryFrom(ctx)
	for _, it := range items {
		if hinted && it.kind == kPut && it.expires == 0 && (it.role == roleTarget || it.role == roleCopy || it.role == roleMirror) {
			// The caller's TTL backstop (metastore.WithExpiry) on every
			// copy of the key it writes; never on lake's control records.
			it.expires = ttlOf(hint)
		}
		twi, err := d.transactItem(it, token, now)
		if err != nil {
			return 0, err
		}
		in.TransactItems = append(in.TransactItems, twi)
	}
	ambiguous := false
	units := 0.0
	err := d.retry(ctx, func(int) error {
		out, err := d.api.TransactWriteItems(ctx, in)
		if err == nil {
			d.meter.request("TransactWriteItems", 0, 0, out.ConsumedCapacity...)
			for _, c := range out.ConsumedCapacity {
				units += aws.ToFloat64(c.WriteCapacityUnits)
				if c.WriteCapacityUnits == nil {
					units += aws.ToFloat64(c.CapacityUnits)
				}
			}
			return nil
		}
		d.meter.request("TransactWriteItems", 0, 0)
		if !ddb.SurelyNotApplied(err) {
			ambiguous = true
		}
		return err
	})
	if err == nil {
		return units, nil
	}
	if ambiguous {
		if applied, known := ownWriteApplied(err, items, token); !known {
			return 0, fmt.Errorf("%w: the outcome of a write to %q is unknown after a lost response: %v", metastore.ErrUnavailable, items[len(items)-1].key, err)
		} else if applied {
			return 0, nil
		}
	}
	return 0, d.classifyTx(err, items)
}

// classifyTx translates a failed transaction by the role of the item whose
// condition failed.
func (d *Driver) classifyTx(err error, items []txItem) error {
	if tce, ok := asCanceled(err); ok && len(tce.CancellationReasons) == len(items) {
		for i, r := range tce.CancellationReasons {
			if aws.ToString(r.Code) != "ConditionalCheckFailed" {
				continue
			}
			it := items[i]
			switch it.role {
			case roleBarrier:
				return errBarrier
			case roleState:
				return ErrStateMoved
			case roleCopy:
				return fmt.Errorf("%w: the v2 copy of %q differs from v1, the authority (failed closed, nothing changed); run `lake dynamo-migrate repair`", ErrDiverged, it.key)
			case roleGuard:
				return metastore.Conflict(it.key, "guard does not hold its expected value")
			default:
				return metastore.Conflict(it.key, "current value differs from expected")
			}
		}
	}
	return d.classify(err, d.tableName(items[0].t))
}

// ownWriteApplied looks at a failed retry of a transaction whose earlier
// attempt may have applied. It returns (true, true) if the old items
// DynamoDB returned with the cancellation carry this transaction's token
// (the earlier attempt applied, and nobody wrote since), (false, true) if
// they show another writer, and (false, false) if it cannot tell (a delete
// leaves no item to carry the token).
func ownWriteApplied(err error, items []txItem, token string) (applied, known bool) {
	tce, ok := asCanceled(err)
	if !ok || len(tce.CancellationReasons) != len(items) {
		return false, true
	}
	for i, r := range tce.CancellationReasons {
		if aws.ToString(r.Code) != "ConditionalCheckFailed" {
			continue
		}
		it := items[i]
		switch {
		case it.kind == kCheck:
			return false, true
		case it.kind == kDelete:
			if r.Item == nil {
				return false, false
			}
			return false, true
		}
		w, _ := r.Item[attrWrite].(*types.AttributeValueMemberS)
		v, _ := r.Item[attrValue].(*types.AttributeValueMemberB)
		return w != nil && w.Value == token && v != nil && bytes.Equal(v.Value, it.value), true
	}
	return false, true
}

// keyOf is the primary key of a transaction item.
func (d *Driver) keyOf(it txItem) map[string]types.AttributeValue {
	if it.bucket != "" {
		return map[string]types.AttributeValue{
			attrBucket: &types.AttributeValueMemberS{Value: it.bucket},
			attrPK:     &types.AttributeValueMemberS{Value: it.key},
		}
	}
	return d.keyIn(it.t, it.key)
}

func (d *Driver) transactItem(it txItem, token, now string) (types.TransactWriteItem, error) {
	table := aws.String(d.tableName(it.t))
	var names map[string]string
	var values map[string]types.AttributeValue
	var cond *string
	if it.cond != nil {
		e, err := expression.NewBuilder().WithCondition(*it.cond).Build()
		if err != nil {
			return types.TransactWriteItem{}, fmt.Errorf("lake: build condition: %w", err)
		}
		names, values, cond = e.Names(), e.Values(), e.Condition()
	}
	old := types.ReturnValuesOnConditionCheckFailureAllOld
	switch it.kind {
	case kCheck:
		if cond == nil {
			return types.TransactWriteItem{}, errors.New("lake: a condition check needs a condition")
		}
		return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: table, Key: d.keyOf(it), ConditionExpression: cond,
			ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		}}, nil
	case kDelete:
		return types.TransactWriteItem{Delete: &types.Delete{
			TableName: table, Key: d.keyOf(it), ConditionExpression: cond,
			ExpressionAttributeNames: names, ExpressionAttributeValues: values,
			ReturnValuesOnConditionCheckFailure: old,
		}}, nil
	default:
		item := d.keyOf(it)
		item[attrValue] = &types.AttributeValueMemberB{Value: it.value}
		if it.expires > 0 {
			item[attrExpires] = &types.AttributeValueMemberN{Value: strconv.FormatInt(it.expires, 10)}
		}
		item[attrWrite] = &types.AttributeValueMemberS{Value: token}
		item[attrTime] = &types.AttributeValueMemberN{Value: now}
		if size := itemSize(item); size > maxItemBytes {
			return types.TransactWriteItem{}, fmt.Errorf("%w: item %q would be %d bytes, DynamoDB's limit is %d", metastore.ErrInvalidValue, it.key, size, maxItemBytes)
		}
		return types.TransactWriteItem{Put: &types.Put{
			TableName: table, Item: item, ConditionExpression: cond,
			ExpressionAttributeNames: names, ExpressionAttributeValues: values,
			ReturnValuesOnConditionCheckFailure: old,
		}}, nil
	}
}

// itemSize is DynamoDB's item size: attribute names plus values.
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberB:
			n += len(v.Value)
		case *types.AttributeValueMemberN:
			n += len(v.Value)
		}
	}
	return n
}

// ttlOf is the TTL attribute's value for an expiry hint: unix seconds, at
// least 1 (DynamoDB ignores 0 and negative values; a hint in the past means
// "deletable now").
func ttlOf(at time.Time) int64 { return max(1, at.Unix()) }

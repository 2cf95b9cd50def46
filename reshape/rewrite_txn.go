package reshape

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// errRaced is returned by transact when DynamoDB cancelled the transaction
// because a condition failed or another transaction wrote one of its items:
// someone wrote meanwhile, and the caller re-reads and decides again.
var errRaced = errors.New("lake: reshape: an item changed meanwhile")

// asRead is the condition "the item at its key is as read": absent when
// item is nil, else existing and holding every attribute read with the same
// value. (A condition cannot name attributes it has not seen, so a write
// that only adds an attribute goes unnoticed here; verify compares whole
// items and finds it.)
func (r *Rewrite) asRead(item map[string]types.AttributeValue, n *attrNames) expression.ConditionBuilder {
	if item == nil {
		return expression.AttributeNotExists(n.name(r.keyNames[0]))
	}
	cond := expression.AttributeExists(n.name(r.keyNames[0]))
	names := make([]string, 0, len(item))
	for n := range item {
		if !slices.Contains(r.keyNames, n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, a := range names {
		cond = expression.And(cond, n.name(a).Equal(expression.Value(item[a])))
	}
	return cond
}

// txn collects the items of one TransactWriteItems.
type txn struct {
	r     *Rewrite
	items []types.TransactWriteItem
	err   error
}

func (r *Rewrite) txn() *txn { return &txn{r: r} }

// built is one transaction item's expressions, its names resolved.
type built struct {
	cond, update *string
	names        map[string]string
	values       map[string]types.AttributeValue
}

// build builds the condition "as read" (and an update) of one transaction
// item, every attribute name taken literally (attrNames).
func (t *txn) build(read map[string]types.AttributeValue, update func(n *attrNames) expression.UpdateBuilder) built {
	var n attrNames
	b := expression.NewBuilder().WithCondition(t.r.asRead(read, &n))
	if update != nil {
		b = b.WithUpdate(update(&n))
	}
	e, err := b.Build()
	if err != nil && t.err == nil {
		t.err = fmt.Errorf("lake: reshape: build expression: %w", err)
	}
	out := built{cond: e.Condition(), names: n.resolve(e.Names()), values: e.Values()}
	if update != nil {
		out.update = e.Update()
	}
	return out
}

// check adds a ConditionCheck that the item at key is as read (nil: absent).
func (t *txn) check(key, read map[string]types.AttributeValue) *txn {
	e := t.build(read, nil)
	t.items = append(t.items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: aws.String(t.r.spec.Table), Key: key, ConditionExpression: e.cond,
		ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
	}})
	return t
}

// put adds a Put of item, conditioned on its key's item being as read.
func (t *txn) put(item, read map[string]types.AttributeValue) *txn {
	e := t.build(read, nil)
	t.items = append(t.items, types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(t.r.spec.Table), Item: item, ConditionExpression: e.cond,
		ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
	}})
	return t
}

// del adds a Delete of the item at key, conditioned on it being as read.
func (t *txn) del(key, read map[string]types.AttributeValue) *txn {
	e := t.build(read, nil)
	t.items = append(t.items, types.TransactWriteItem{Delete: &types.Delete{
		TableName: aws.String(t.r.spec.Table), Key: key, ConditionExpression: e.cond,
		ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
	}})
	return t
}

// unmark adds an Update removing the marker from the copy at key,
// conditioned on the copy being as read.
func (t *txn) unmark(key, read map[string]types.AttributeValue) *txn {
	e := t.build(read, func(n *attrNames) expression.UpdateBuilder { return expression.Remove(n.name(t.r.marker())) })
	t.items = append(t.items, types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(t.r.spec.Table), Key: key, ConditionExpression: e.cond, UpdateExpression: e.update,
		ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
	}})
	return t
}

// run sends the transaction. It returns errRaced when DynamoDB cancelled it
// for a failed condition or a conflicting transaction, and the write
// capacity it used.
func (t *txn) run(ctx context.Context, spend Spender) (float64, error) {
	if t.err != nil {
		return 0, t.err
	}
	if len(t.items) == 0 {
		return 0, nil
	}
	est := 0.0
	for _, it := range t.items {
		switch {
		case it.Put != nil:
			est += 2 * ceilKB(itemSize(it.Put.Item))
		default:
			est += 2 // a transactional write costs two units per KB; deletes and checks are small
		}
	}
	if spend != nil {
		if err := spend(ctx, est); err != nil {
			return 0, err
		}
	}
	out, err := t.r.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: t.items, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	used := est
	if err == nil {
		used = 0
		for _, c := range out.ConsumedCapacity {
			used += aws.ToFloat64(c.CapacityUnits)
		}
		if used == 0 {
			used = est
		}
	}
	if spend != nil && used != est {
		if serr := spend(ctx, used-est); serr != nil && err == nil {
			return used, serr
		}
	}
	if err != nil {
		var tce *types.TransactionCanceledException
		var tcf *types.TransactionConflictException
		if errors.As(err, &tce) || errors.As(err, &tcf) {
			return used, errRaced
		}
		return used, fmt.Errorf("lake: reshape: transaction on %s: %w", t.r.spec.Table, err)
	}
	return used, nil
}

func ceilKB(n int) float64 { return float64((n + 1023) / 1024) }

// avEqual compares two attribute values as DynamoDB does: sets in any order.
func avEqual(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Equal(a.Value, b.Value)
	case *types.AttributeValueMemberBOOL:
		b, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberNULL:
		b, ok := b.(*types.AttributeValueMemberNULL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberSS:
		b, ok := b.(*types.AttributeValueMemberSS)
		return ok && sameSet(a.Value, b.Value)
	case *types.AttributeValueMemberNS:
		b, ok := b.(*types.AttributeValueMemberNS)
		return ok && sameSet(a.Value, b.Value)
	case *types.AttributeValueMemberBS:
		b, ok := b.(*types.AttributeValueMemberBS)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		as, bs := make([]string, len(a.Value)), make([]string, len(b.Value))
		for i := range a.Value {
			as[i], bs[i] = string(a.Value[i]), string(b.Value[i])
		}
		return sameSet(as, bs)
	case *types.AttributeValueMemberL:
		b, ok := b.(*types.AttributeValueMemberL)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		for i := range a.Value {
			if !avEqual(a.Value[i], b.Value[i]) {
				return false
			}
		}
		return true
	case *types.AttributeValueMemberM:
		b, ok := b.(*types.AttributeValueMemberM)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		for k, v := range a.Value {
			if !avEqual(v, b.Value[k]) {
				return false
			}
		}
		return true
	}
	return false
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	sort.Strings(a)
	sort.Strings(b)
	return slices.Equal(a, b)
}

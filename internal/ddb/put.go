package ddb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
)

// TokenAttr is the attribute in which PutOnce stamps a write's token, in
// every table lake writes with it. NB: part of the table formats; must not
// change.
const TokenAttr = "w"

// ErrUnknownOutcome is matched by PutOnce's error when an attempt's response was
// lost and the read-back found the item without the write's token: the
// write never arrived, or it applied and another writer replaced it since.
// It matches metastore.ErrUnavailable: the caller reads the item and
// decides, as for any write whose outcome is unknown.
var ErrUnknownOutcome = fmt.Errorf("%w: the outcome of a conditional write is unknown after a lost response (the item does not carry the write's token)", metastore.ErrUnavailable)

// NewToken returns a fresh write token, 128 random bits in hex: a
// PutOnce token, or a transaction's ClientRequestToken (at most 36
// characters).
func NewToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Put is one single-item conditional write for PutOnce.
type Put struct {
	Table string
	// Item is the whole item to write; PutOnce stamps Token into its
	// TokenAttr.
	Item map[string]types.AttributeValue
	// Token is the write's token; empty means a fresh NewToken.
	Token string
	// Condition is the write's own condition; nil means none.
	Condition *expression.ConditionBuilder
	// What names the item in errors (a key).
	What string
}

// Writer sends single-item conditional writes with PutOnce.
type Writer struct {
	API     API
	Retryer aws.Retryer
	// Meter, if not nil, counts every attempt: each PutItem sent, a
	// written item for the one that succeeded.
	Meter *Meter
}

// PutOnce applies p with one conditional PutItem, exactly once, retrying
// under w.Retryer. It stamps the item with the write's token (TokenAttr),
// so that an attempt whose outcome was not seen can be recognised:
//
//   - A failed condition on a first attempt, or on one that followed only
//     certain refusals (throttling, a ConditionalCheckFailed, a validation
//     error: SurelyNotApplied), is the caller's conflict: PutOnce returns
//     the SDK's ConditionalCheckFailedException (Classify: ConditionFailed)
//     for the caller to word.
//   - After an ambiguous attempt (a lost response, a reset, a timeout, a
//     5xx: the write may have landed), every retry is conditioned on the
//     item carrying this write's token instead of p.Condition: a read-back
//     in the same request. If the token is there, the earlier attempt
//     applied, the retry rewrites the item identically and PutOnce returns
//     nil. Should the condition fail, the item DynamoDB returns lacks the
//     token: the earlier attempt never arrived, or applied and was
//     overwritten since, so the outcome is unknown (ErrUnknownOutcome),
//     never a conflict.
//
// A retry under p's own condition could apply the write twice: a Put over
// a later writer's value (that value would vanish and the Put reappear), a
// compare-and-swap after another writer put the expected value back (A→B by
// us, B→A by them, A→B by our retry): neither is linearizable. And a caller
// that took a failed condition after a lost response for a conflict would
// not recognise its own write (a lock holder that waits a lease for itself
// and then takes over from itself). The price is that a write whose request
// (not response) was lost is reported unknown too.
//
// Other errors are returned as the SDK gave them, for the caller's
// classification.
func (w Writer) PutOnce(ctx context.Context, p Put) error {
	if p.Token == "" {
		p.Token = NewToken()
	}
	item := make(map[string]types.AttributeValue, len(p.Item)+1)
	for k, v := range p.Item {
		item[k] = v
	}
	item[TokenAttr] = &types.AttributeValueMemberS{Value: p.Token}
	first, err := putInput(p.Table, item, p.Condition)
	if err != nil {
		return err
	}
	in, ambiguous := first, false
	err = Retry(ctx, w.Retryer, func(int) error {
		if ambiguous && in == first {
			// From now on the write may only confirm its own attempt.
			own := expression.Name(TokenAttr).Equal(expression.Value(&types.AttributeValueMemberS{Value: p.Token}))
			confirm, err := putInput(p.Table, item, &own)
			if err != nil {
				return err
			}
			in = confirm
		}
		out, err := w.API.PutItem(ctx, in)
		if err == nil {
			w.record(Use{Table: p.Table, Written: 1, Capacity: Capacity(out.ConsumedCapacity)})
			return nil
		}
		w.record(Use{Table: p.Table})
		if !SurelyNotApplied(err) {
			ambiguous = true
		}
		return err
	})
	if err != nil && ambiguous && Classify(err) == ConditionFailed {
		return fmt.Errorf("%w: %s", ErrUnknownOutcome, p.What)
	}
	return err
}

func (w Writer) record(u Use) {
	if w.Meter != nil {
		w.Meter.Record("PutItem", u)
	}
}

// putInput is the PutItem of item conditioned on cond (nil: none).
func putInput(table string, item map[string]types.AttributeValue, cond *expression.ConditionBuilder) (*dynamodb.PutItemInput, error) {
	in := &dynamodb.PutItemInput{
		TableName:                           aws.String(table),
		Item:                                item,
		ReturnConsumedCapacity:              types.ReturnConsumedCapacityTotal,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if cond == nil {
		return in, nil
	}
	e, err := expression.NewBuilder().WithCondition(*cond).Build()
	if err != nil {
		return nil, fmt.Errorf("lake: build condition: %w", err)
	}
	in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.Condition(), e.Names(), e.Values()
	return in, nil
}

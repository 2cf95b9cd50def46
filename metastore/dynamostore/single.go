package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
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
// with the write's token: ddb.Writer.PutOnce, whose doc comment states the
// exactly-once rules of an ambiguous attempt that keep the guarantees of
// transact. A failed condition of the write's own is a conflict; a lost
// response whose item no longer carries the token is unknown
// (ErrUnavailable), never a conflict.
func (d *Driver) putItem(ctx context.Context, t tbl, m mutation) error {
	item := d.keyIn(t, m.key)
	item[attrValue] = &types.AttributeValueMemberB{Value: m.value}
	item[attrTime] = &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().UnixMilli(), 10)}
	if at, ok := metastore.ExpiryFrom(ctx); ok {
		// The caller's TTL backstop (metastore.WithExpiry).
		item[attrExpires] = &types.AttributeValueMemberN{Value: strconv.FormatInt(ttlOf(at), 10)}
	}
	// The token is stamped here too, so that the size check counts it.
	token := ddb.NewToken()
	item[attrWrite] = &types.AttributeValueMemberS{Value: token}
	if size := itemSize(item); size > maxItemBytes {
		return fmt.Errorf("%w: item %q would be %d bytes, DynamoDB's limit is %d", metastore.ErrInvalidValue, m.key, size, maxItemBytes)
	}
	var cond *expression.ConditionBuilder
	if m.expect != nil {
		cond = condExpect(*m.expect)
	}
	w := ddb.Writer{API: d.api, Retryer: d.retryer, Meter: &d.meter.Meter}
	err := w.PutOnce(ctx, ddb.Put{Table: d.tableName(t), Item: item, Token: token, Condition: cond, What: strconv.Quote(m.key)})
	if errors.Is(err, ddb.ErrUnknownOutcome) {
		return err
	}
	return d.classify(err, d.tableName(t), m.key)
}

// conditionExpr builds a condition alone.
func conditionExpr(c expression.ConditionBuilder) (expression.Expression, error) {
	e, err := expression.NewBuilder().WithCondition(c).Build()
	if err != nil {
		return e, fmt.Errorf("lake: build condition: %w", err)
	}
	return e, nil
}

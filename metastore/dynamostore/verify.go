package dynamostore

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
)

// DiffKind says how the two copies of a key differ.
type DiffKind string

// The kinds of difference.
const (
	MissingInV2 DiffKind = "missing-in-v2"
	ExtraInV2   DiffKind = "extra-in-v2"
	Different   DiffKind = "different"
)

// Difference is one key whose copies differ, confirmed by an atomic read of
// both (TransactGetItems) after the scan saw it.
type Difference struct {
	Key  string   `json:"key"`
	Kind DiffKind `json:"kind"`
	// Unstamped is set when v1's copy lacks lake's stamp: a writer that is
	// not lake (a legacy binary) wrote it.
	Unstamped bool `json:"unstamped,omitempty"`
}

// VerifyPageResult is one page of a verification pass.
type VerifyPageResult struct {
	// Checked counts keys, each once across both passes: the v1 pass
	// counts every v1 key, the v2 pass only the v2 keys v1 lacks.
	Checked     int64
	Differences []Difference
	Next        string // empty when the pass is done
}

// Segment is one segment of a parallel Scan: Index of Total (Total ≤ 1
// means the whole table).
type Segment struct{ Index, Total int }

// batchGetMax is BatchGetItem's limit of keys per request.
const batchGetMax = 100

// VerifyV1Page checks one page of v1 against v2: every v1 item must have
// an equal v2 copy. With since set, only items lake wrote at or after since,
// and items without lake's stamp, are checked (the re-verification under
// the barrier). Read-only; safe during live writes.
func (p Primitives) VerifyV1Page(ctx context.Context, seg Segment, from string, limit int, since *time.Time) (VerifyPageResult, error) {
	d := p.d
	var filter *expression.ConditionBuilder
	if since != nil {
		f := expression.AttributeNotExists(expression.Name(attrWrite)).
			Or(expression.Name(attrTime).GreaterThanEqual(expression.Value(&types.AttributeValueMemberN{Value: strconv.FormatInt(since.UnixMilli(), 10)})))
		filter = &f
	}
	items, next, err := d.scanPage(ctx, tV1, seg, from, limit, filter)
	if err != nil {
		return VerifyPageResult{}, err
	}
	res := VerifyPageResult{Next: next}
	var keys []string
	byKey := map[string]map[string]types.AttributeValue{}
	for _, it := range items {
		k := pkOf(it)
		if k == "" || metastore.IsControlKey(k) {
			continue
		}
		keys = append(keys, k)
		byKey[k] = it
	}
	res.Checked = int64(len(keys))
	other, err := d.batchGet(ctx, tV2, keys)
	if err != nil {
		return res, err
	}
	for _, k := range keys {
		v2, ok := other[k]
		if ok && bytes.Equal(valueOf(v2), valueOf(byKey[k])) {
			continue
		}
		if diff, still, err := d.confirm(ctx, k); err != nil {
			return res, err
		} else if still {
			res.Differences = append(res.Differences, diff)
		}
	}
	return res, nil
}

// VerifyV2Page checks one page of v2 against v1: every v2 item must exist
// in v1 (values are compared by VerifyV1Page). With since set, only items
// written at or after since are checked.
func (p Primitives) VerifyV2Page(ctx context.Context, seg Segment, from string, limit int, since *time.Time) (VerifyPageResult, error) {
	d := p.d
	// Every control partition (records, change log) starts with the
	// control prefix; user buckets never do.
	f := expression.Not(expression.BeginsWith(expression.Name(attrBucket), metastore.ControlPrefix))
	if since != nil {
		f = f.And(expression.Name(attrTime).GreaterThanEqual(expression.Value(&types.AttributeValueMemberN{Value: strconv.FormatInt(since.UnixMilli(), 10)})))
	}
	items, next, err := d.scanPage(ctx, tV2, seg, from, limit, &f)
	if err != nil {
		return VerifyPageResult{}, err
	}
	res := VerifyPageResult{Next: next}
	var keys []string
	for _, it := range items {
		if k := pkOf(it); k != "" {
			keys = append(keys, k)
		}
	}
	other, err := d.batchGet(ctx, tV1, keys)
	if err != nil {
		return res, err
	}
	for _, k := range keys {
		if _, ok := other[k]; ok {
			continue // a v1 key: the v1 pass checks and counts it
		}
		res.Checked++
		if diff, still, err := d.confirm(ctx, k); err != nil {
			return res, err
		} else if still {
			res.Differences = append(res.Differences, diff)
		}
	}
	return res, nil
}

// confirm reads both copies at one instant and reports a difference only
// if it is still there.
func (d *Driver) confirm(ctx context.Context, key string) (Difference, bool, error) {
	var out *dynamodb.TransactGetItemsOutput
	err := d.retry(ctx, func(int) error {
		var err error
		out, err = d.api.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{
			TransactItems: []types.TransactGetItem{
				{Get: &types.Get{TableName: aws.String(d.v1), Key: d.keyIn(tV1, key)}},
				{Get: &types.Get{TableName: aws.String(d.v2), Key: d.keyIn(tV2, key)}},
			},
		})
		return err
	})
	if err != nil {
		return Difference{}, false, d.classify(err, d.v1, key)
	}
	d.meter.request("TransactGetItems", 2, 2)
	r1, r2 := out.Responses[0].Item, out.Responses[1].Item
	diff := Difference{Key: key}
	if r1 != nil {
		_, stamped := r1[attrWrite]
		diff.Unstamped = !stamped
	}
	switch {
	case r1 == nil && r2 == nil:
		return diff, false, nil
	case r2 == nil:
		diff.Kind = MissingInV2
	case r1 == nil:
		diff.Kind = ExtraInV2
	case bytes.Equal(valueOf(r1), valueOf(r2)):
		return diff, false, nil
	default:
		diff.Kind = Different
	}
	return diff, true, nil
}

// scanPage is one strongly consistent Scan page of table t.
func (d *Driver) scanPage(ctx context.Context, t tbl, seg Segment, from string, limit int, filter *expression.ConditionBuilder) ([]map[string]types.AttributeValue, string, error) {
	in := &dynamodb.ScanInput{
		TableName: aws.String(d.tableName(t)), Limit: aws.Int32(int32(limit)), ConsistentRead: aws.Bool(true),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}
	if seg.Total > 1 {
		in.Segment, in.TotalSegments = aws.Int32(int32(seg.Index)), aws.Int32(int32(seg.Total))
	}
	if filter != nil {
		e, err := expression.NewBuilder().WithFilter(*filter).Build()
		if err != nil {
			return nil, "", err
		}
		in.FilterExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.Filter(), e.Names(), e.Values()
	}
	if from != "" {
		// A v2 position carries its partition: a change-log entry's pk
		// does not say which bucket it is in.
		bucket, pk, ok := strings.Cut(from, "\x00")
		if t != tV2 || !ok {
			in.ExclusiveStartKey = d.keyIn(t, from)
		} else {
			in.ExclusiveStartKey = map[string]types.AttributeValue{
				attrBucket: &types.AttributeValueMemberS{Value: bucket},
				attrPK:     &types.AttributeValueMemberS{Value: pk},
			}
		}
	}
	var out *dynamodb.ScanOutput
	err := d.retry(ctx, func(int) error {
		var err error
		out, err = d.api.Scan(ctx, in)
		return err
	})
	if err != nil {
		return nil, "", d.classify(err, d.tableName(t))
	}
	d.meter.request("Scan", out.ScannedCount, out.Count, ccOf(out.ConsumedCapacity)...)
	next := ""
	if out.LastEvaluatedKey != nil {
		next = pkOf(out.LastEvaluatedKey)
		if b, ok := out.LastEvaluatedKey[attrBucket].(*types.AttributeValueMemberS); ok && t == tV2 {
			next = b.Value + "\x00" + next
		}
	}
	return out.Items, next, nil
}

// batchGet reads keys from table t, strongly consistent, 100 to a request.
func (d *Driver) batchGet(ctx context.Context, t tbl, keys []string) (map[string]map[string]types.AttributeValue, error) {
	found := map[string]map[string]types.AttributeValue{}
	name := d.tableName(t)
	for start := 0; start < len(keys); start += batchGetMax {
		var ks []map[string]types.AttributeValue
		for _, k := range keys[start:min(start+batchGetMax, len(keys))] {
			ks = append(ks, d.keyIn(t, k))
		}
		pending := map[string]types.KeysAndAttributes{name: {Keys: ks, ConsistentRead: aws.Bool(true)}}
		for len(pending) > 0 {
			var out *dynamodb.BatchGetItemOutput
			err := d.retry(ctx, func(int) error {
				var err error
				out, err = d.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: pending, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
				return err
			})
			if err != nil {
				return nil, d.classify(err, name)
			}
			got := out.Responses[name]
			d.meter.request("BatchGetItem", int32(len(got)), int32(len(got)), out.ConsumedCapacity...)
			for _, it := range got {
				found[pkOf(it)] = it
			}
			pending = out.UnprocessedKeys
			if len(pending) > 0 {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	return found, nil
}

func pkOf(item map[string]types.AttributeValue) string {
	if s, ok := item[attrPK].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

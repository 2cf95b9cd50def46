package dynamostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/sweep"
)

// sweepBucketPrefix starts the v2 partition of each sweep's durable state;
// it starts with metastore.ControlPrefix, so verification and prefix reads
// never see it.
const sweepBucketPrefix = metastore.ControlPrefix + "#sweep/"

// Keys within a sweep's partition.
const (
	sweepHeaderKey = "segments"
	sweepSegPrefix = "seg/"
)

// BackfillCheckpoints returns the durable cursors of the backfill of the
// dual period m belongs to, kept as control items in the v2 table (one
// partition per dual period, so a backfill after a rollback and a new dual
// starts over), for package sweep.
func (p Primitives) BackfillCheckpoints(m Migration) sweep.Checkpoints {
	return p.SweepCheckpoints("backfill/" + strconv.FormatInt(m.DualSince.UnixMilli(), 10))
}

// SweepCheckpoints returns durable cursors for the sweep named name, kept as
// control items in the v2 table: one item holds the segment count, one per
// segment its cursor. Each is written with one PutItem before the call
// returns.
func (p Primitives) SweepCheckpoints(name string) sweep.Checkpoints {
	return sweepCheckpoints{d: p.d, bucket: sweepBucketPrefix + name}
}

type sweepCheckpoints struct {
	d      *Driver
	bucket string
}

func (c sweepCheckpoints) key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrBucket: &types.AttributeValueMemberS{Value: c.bucket},
		attrPK:     &types.AttributeValueMemberS{Value: pk},
	}
}

// Load implements sweep.Checkpoints.
func (c sweepCheckpoints) Load(ctx context.Context) (*sweep.State, error) {
	d := c.d
	kc, err := expression.NewBuilder().WithKeyCondition(expression.Key(attrBucket).Equal(expression.Value(c.bucket))).Build()
	if err != nil {
		return nil, fmt.Errorf("lake: build key condition: %w", err)
	}
	var items []map[string]types.AttributeValue
	var start map[string]types.AttributeValue
	for {
		var out *dynamodb.QueryOutput
		err := d.retry(ctx, func(int) error {
			d.meter.control()
			var err error
			out, err = d.api.Query(ctx, &dynamodb.QueryInput{
				TableName: aws.String(d.v2), KeyConditionExpression: kc.KeyCondition(),
				ExpressionAttributeNames: kc.Names(), ExpressionAttributeValues: kc.Values(),
				ConsistentRead: aws.Bool(true), ExclusiveStartKey: start,
			})
			return err
		})
		if err != nil {
			return nil, d.classify(err, d.v2)
		}
		items = append(items, out.Items...)
		if start = out.LastEvaluatedKey; len(start) == 0 {
			break
		}
	}
	var st *sweep.State
	cursors := map[int]sweep.Cursor{}
	for _, it := range items {
		pk := pkOf(it)
		v := valueOf(it)
		switch {
		case pk == sweepHeaderKey:
			n, err := strconv.Atoi(string(v))
			if err != nil || n < 1 || n > sweep.MaxSegments {
				return nil, fmt.Errorf("lake: sweep state %s is damaged: segment count %q", c.bucket, v)
			}
			st = &sweep.State{Segments: n, Cursors: make([]sweep.Cursor, n)}
		case strings.HasPrefix(pk, sweepSegPrefix):
			seg, err := strconv.Atoi(strings.TrimPrefix(pk, sweepSegPrefix))
			var cur sweep.Cursor
			if err == nil {
				err = json.Unmarshal(v, &cur)
			}
			if err != nil {
				return nil, fmt.Errorf("lake: sweep state %s is damaged: %s: %v", c.bucket, pk, err)
			}
			cursors[seg] = cur
		}
	}
	if st == nil {
		return nil, nil
	}
	for seg, cur := range cursors {
		if seg < 0 || seg >= st.Segments {
			return nil, fmt.Errorf("lake: sweep state %s is damaged: cursor of segment %d of %d", c.bucket, seg, st.Segments)
		}
		st.Cursors[seg] = cur
	}
	return st, nil
}

// Init implements sweep.Checkpoints: the segment count is created once,
// conditioned on no sweep being recorded. A retry after a lost response
// recognises its own write by the token on the item.
func (c sweepCheckpoints) Init(ctx context.Context, segments int) error {
	err := c.put(ctx, sweepHeaderKey, []byte(strconv.Itoa(segments)), true)
	if errors.Is(err, metastore.ErrConflict) {
		return sweep.ErrRecorded
	}
	return err
}

// Save implements sweep.Checkpoints.
func (c sweepCheckpoints) Save(ctx context.Context, segment int, cur sweep.Cursor) error {
	b, err := json.Marshal(cur)
	if err != nil {
		return err
	}
	return c.put(ctx, fmt.Sprintf("%s%04d", sweepSegPrefix, segment), b, false)
}

// put writes one item of the sweep's state; with create, only if absent,
// exactly once (ddb.Writer.PutOnce: a lost response is read back by the
// write's token). A checkpoint (not create) has one writer, its segment's
// sweep, and is written unconditionally: a retry may repeat it.
func (c sweepCheckpoints) put(ctx context.Context, pk string, value []byte, create bool) error {
	d := c.d
	item := c.key(pk)
	item[attrValue] = &types.AttributeValueMemberB{Value: value}
	item[attrTime] = &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().UnixMilli(), 10)}
	if create {
		d.meter.control()
		w := ddb.Writer{API: d.api, Retryer: d.retryer}
		err := w.PutOnce(ctx, ddb.Put{Table: d.v2, Item: item, Condition: condAbsent(), What: strconv.Quote(pk)})
		if err == nil || errors.Is(err, ddb.ErrUnknownOutcome) {
			return err
		}
		return d.classify(err, d.v2, pk)
	}
	item[attrWrite] = &types.AttributeValueMemberS{Value: ddb.NewToken()}
	in := &dynamodb.PutItemInput{TableName: aws.String(d.v2), Item: item}
	err := d.retry(ctx, func(int) error {
		d.meter.control()
		_, err := d.api.PutItem(ctx, in)
		return err
	})
	return d.classify(err, d.v2, pk)
}

// SweepClient returns the client a sweep over this store's tables scans
// with: each Scan retried as the store retries, and metered.
func (p Primitives) SweepClient() sweep.Client { return retryingScan(p) }

type retryingScan struct{ d *Driver }

// Scan implements sweep.Client.
func (r retryingScan) Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	var out *dynamodb.ScanOutput
	err := r.d.retry(ctx, func(int) error {
		var err error
		out, err = r.d.api.Scan(ctx, in, optFns...)
		return err
	})
	if err != nil {
		return nil, r.d.classify(err, aws.ToString(in.TableName))
	}
	r.d.meter.request("Scan", out.ScannedCount, out.Count, ccOf(out.ConsumedCapacity)...)
	return out, nil
}

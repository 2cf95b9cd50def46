package dynamostore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
)

// The change log records, in v2, every key a dual-mode mutation wrote: one
// small entry per write, in the same transaction, in the partition of the
// key's barrier shard (so writes spread as the barrier's checks do), sorted
// by time first (so "what changed since T" is a key condition, not a
// filter). Finalize reads it to re-verify only what changed since the
// online verify. Entries expire through DynamoDB's TTL after changeLogTTL.
//
// NB: the bucket and key formats are read by other binaries; must not change.
const (
	changeBucketFmt = metastore.ControlPrefix + "#chg#%03d"
	changeLogTTL    = 7 * 24 * time.Hour
)

// ChangeBucket is the v2 partition of barrier shard i's change log.
func ChangeBucket(i int) string { return fmt.Sprintf(changeBucketFmt, i) }

// maxSortKey is DynamoDB's limit on a range key, in bytes.
const maxSortKey = 1024

// changeKey sorts by write time (zero-padded unix milliseconds), then key.
// A key too long to follow the time within DynamoDB's range-key limit is
// replaced by its SHA-256 (unique, so two long keys never share an entry),
// and the entry carries the key in its value (see changeValue); entries of
// other keys have an empty value.
func changeKey(t time.Time, key string) string {
	k := fmt.Sprintf("%013d#%s", t.UnixMilli(), key)
	if len(k) <= maxSortKey {
		return k
	}
	sum := sha256.Sum256([]byte(key))
	return fmt.Sprintf("%013d#sha256:%s", t.UnixMilli(), hex.EncodeToString(sum[:]))
}

// changeValue is the value of key's change-log entry: the key itself when
// changeKey had to hash it, else empty.
func changeValue(key string) []byte {
	if len(key)+14 > maxSortKey {
		return []byte(key)
	}
	return []byte{}
}

// ChangedKeys returns the keys dual-mode mutations wrote at or after since
// (by the writers' clocks), from every shard's change log, each once;
// strongly consistent.
func (p Primitives) ChangedKeys(ctx context.Context, shards int, since time.Time) ([]string, error) {
	d := p.d
	seen := map[string]bool{}
	var keys []string
	from := fmt.Sprintf("%013d", max(since.UnixMilli(), 0))
	for i := range shards {
		kc := expression.Key(attrBucket).Equal(expression.Value(ChangeBucket(i))).And(expression.Key(attrPK).GreaterThanEqual(expression.Value(from)))
		e, err := expression.NewBuilder().WithKeyCondition(kc).WithProjection(expression.NamesList(expression.Name(attrPK), expression.Name(attrValue))).Build()
		if err != nil {
			return nil, err
		}
		in := &dynamodb.QueryInput{TableName: aws.String(d.v2), KeyConditionExpression: e.KeyCondition(), ProjectionExpression: e.Projection(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(), ConsistentRead: aws.Bool(true)}
		for {
			var out *dynamodb.QueryOutput
			err := d.retry(ctx, func(int) error {
				d.meter.control()
				out, err = d.api.Query(ctx, in)
				return err
			})
			if err != nil {
				return nil, d.classify(err, d.v2)
			}
			for _, it := range out.Items {
				_, key, ok := strings.Cut(pkOf(it), "#")
				if v := valueOf(it); len(v) > 0 {
					key = string(v) // a long key, hashed in the sort key
				}
				if ok && !seen[key] {
					seen[key] = true
					keys = append(keys, key)
				}
			}
			if out.LastEvaluatedKey == nil {
				break
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	}
	return keys, nil
}

// CompareKey reads both copies of key at one instant and returns the
// difference, if any.
func (p Primitives) CompareKey(ctx context.Context, key string) (Difference, bool, error) {
	d := p.d
	return d.confirm(ctx, key)
}

// enableTTL turns on DynamoDB's TTL on the v2 table for the change log's
// attribute; idempotent.
func (d *Driver) enableTTL(ctx context.Context) error { return d.enableTTLOn(ctx, d.v2) }

// enableTTLOn turns on DynamoDB's TTL on table for the attribute "expires"
// (the change log's, and the backstop of writes made with
// metastore.WithExpiry, such as lock records); idempotent.
func (d *Driver) enableTTLOn(ctx context.Context, table string) error {
	_, err := d.api.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(attrExpires), Enabled: aws.Bool(true),
		},
	})
	var ae interface{ ErrorMessage() string }
	if err != nil && errors.As(err, &ae) && strings.Contains(strings.ToLower(ae.ErrorMessage()), "already enabled") {
		return nil
	}
	if err != nil {
		return d.classify(err, table)
	}
	return nil
}

package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
)

// The v1 table's stream is how the migrator sees writes lake did not make.
// The change log (changelog.go) records lake's own dual writes; a legacy
// binary writing v1 directly leaves no entry there, and its DeleteItem
// leaves nothing in v1 either. DynamoDB Streams records every write to v1,
// whoever made it, in shards: each an ordered run of records with
// increasing sequence numbers, which closes after a while (hours on AWS;
// never on DynamoDB Local) and is continued by child shards that name it as
// parent. Records are kept 24 hours.
//
// A verify marks, before its scan, per open shard the sequence number of
// the shard's last record (StreamMark); finalize reads every record after
// the mark, following each marked shard's descendants, and re-checks the
// keys they name. When the records since the mark cannot all be read (a
// shard trimmed, a stream disabled or replaced) the read fails with an
// error matching ErrStreamGap, and finalize refuses: only a fresh verify
// (a new mark) or full scans prove the tables equal then.

// StreamsAPI is the narrow part of the DynamoDB Streams client lake uses;
// tests put a wrapper over the real client between the store and it.
type StreamsAPI interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

var _ StreamsAPI = (*dynamodbstreams.Client)(nil)

// ErrStreamGap is returned when the v1 table's stream cannot show every
// write since a mark: the migrator must then prove equality another way.
var ErrStreamGap = errors.New("lake: the v1 table's stream does not cover the interval since the verify")

// StreamsClientOf returns a DynamoDB Streams client on c's endpoint,
// region, credentials and HTTP client, without SDK retries (the store
// retries). DynamoDB serves its streams API on the same endpoint as its
// tables (DynamoDB Local included); a client built from the AWS
// configuration alone would not follow AWS_ENDPOINT_URL_DYNAMODB.
func StreamsClientOf(c *dynamodb.Client) *dynamodbstreams.Client {
	o := c.Options()
	return dynamodbstreams.New(dynamodbstreams.Options{
		Region: o.Region, Credentials: o.Credentials, BaseEndpoint: o.BaseEndpoint,
		HTTPClient: o.HTTPClient, Retryer: aws.NopRetryer{}, Logger: o.Logger,
	})
}

// streamsFor derives a streams client from api when the caller gave none:
// the SDK's client, or the one a test wrapper unwraps to.
func streamsFor(api ddb.API) StreamsAPI {
	for api != nil {
		switch a := api.(type) {
		case *dynamodb.Client:
			return StreamsClientOf(a)
		case interface{ Unwrap() ddb.API }:
			api = a.Unwrap()
		default:
			return nil
		}
	}
	return nil
}

// StreamMark is where the v1 table's stream stood at an instant.
type StreamMark struct {
	// Arn is the stream's ARN: a stream disabled and enabled again is a
	// new stream, and a mark in the old one proves nothing about it.
	Arn string    `json:"arn"`
	At  time.Time `json:"at"`
	// Shards are the shards open at the mark, each with its last record.
	Shards []ShardMark `json:"shards,omitempty"`
}

// ShardMark is one shard's position.
type ShardMark struct {
	ID string `json:"id"`
	// After is the sequence number of the shard's last record at the
	// mark; empty when the shard had none (it is read from its start).
	After string `json:"after,omitempty"`
}

// streamEnableWait bounds how long EnableStream waits for a new stream to
// leave ENABLING.
const streamEnableWait = 2 * time.Minute

// EnableStream makes sure the v1 table has a stream (KEYS_ONLY when lake
// enables it; an enabled stream is kept as it is, whatever its view type,
// since DynamoDB refuses to change it) and waits until it is ENABLED, then
// returns where capture starts: the stream and the time.
func (p Primitives) EnableStream(ctx context.Context) (StreamMark, error) {
	d := p.d
	arn, err := d.streamArn(ctx)
	if err != nil {
		return StreamMark{}, err
	}
	if arn == "" {
		err := d.retry(ctx, func(int) error {
			_, err := d.api.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(d.v1),
				StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeKeysOnly}})
			return err
		})
		if err != nil {
			return StreamMark{}, fmt.Errorf("lake: enabling the stream of %q: %w", d.v1, d.classify(err, d.v1))
		}
		if arn, err = d.streamArn(ctx); err != nil {
			return StreamMark{}, err
		}
		if arn == "" {
			return StreamMark{}, fmt.Errorf("%w: enabling the stream of %q left no stream", metastore.ErrUnavailable, d.v1)
		}
	}
	if d.streams == nil {
		return StreamMark{Arn: arn, At: time.Now().UTC()}, nil
	}
	deadline := time.Now().Add(streamEnableWait)
	for {
		out, err := d.describeStream(ctx, arn, nil)
		if err != nil {
			return StreamMark{}, err
		}
		if out.StreamDescription.StreamStatus == stypes.StreamStatusEnabled {
			return StreamMark{Arn: arn, At: time.Now().UTC()}, nil
		}
		if time.Now().After(deadline) {
			return StreamMark{}, fmt.Errorf("%w: the stream of %q is still %s after %v", metastore.ErrUnavailable, d.v1, out.StreamDescription.StreamStatus, streamEnableWait)
		}
		select {
		case <-ctx.Done():
			return StreamMark{}, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// streamArn is the v1 table's enabled stream, or "".
func (d *Driver) streamArn(ctx context.Context) (string, error) {
	var out *dynamodb.DescribeTableOutput
	err := d.retry(ctx, func(int) error {
		var err error
		out, err = d.api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(d.v1)})
		return err
	})
	if err != nil {
		return "", d.classify(err, d.v1)
	}
	t := out.Table
	if t.StreamSpecification == nil || !aws.ToBool(t.StreamSpecification.StreamEnabled) {
		return "", nil
	}
	return aws.ToString(t.LatestStreamArn), nil
}

// StreamMarkNow enables the stream if needed and marks, per open shard,
// the sequence number of its last record, read up to the end of the shard
// now. Call it before a scan: every write the scan may miss is after it.
// Without a streams client it fails with ErrStreamGap.
func (p Primitives) StreamMarkNow(ctx context.Context) (StreamMark, error) {
	d := p.d
	if d.streams == nil {
		return StreamMark{}, fmt.Errorf("%w: this store has no DynamoDB Streams client", ErrStreamGap)
	}
	mark, err := p.EnableStream(ctx)
	if err != nil {
		return StreamMark{}, err
	}
	// Stopping early only makes the mark earlier: more to read later,
	// nothing missed.
	mark.At = time.Now().UTC()
	shards, _, err := d.listShards(ctx, mark.Arn)
	if err != nil {
		return StreamMark{}, err
	}
	for _, sh := range shards {
		if sh.SequenceNumberRange != nil && sh.SequenceNumberRange.EndingSequenceNumber != nil {
			continue // closed: entirely before the mark
		}
		id := aws.ToString(sh.ShardId)
		r := shardRead{arn: mark.Arn, shard: sh, upTo: mark.At, partial: true}
		if err := d.readShard(ctx, &r, nil); err != nil {
			return StreamMark{}, err
		}
		mark.Shards = append(mark.Shards, ShardMark{ID: id, After: r.last})
	}
	return mark, nil
}

// listShards describes every shard of the stream, page by page.
func (d *Driver) listShards(ctx context.Context, arn string) ([]stypes.Shard, stypes.StreamStatus, error) {
	var shards []stypes.Shard
	var last *string
	for {
		out, err := d.describeStream(ctx, arn, last)
		if err != nil {
			return nil, "", err
		}
		shards = append(shards, out.StreamDescription.Shards...)
		last = out.StreamDescription.LastEvaluatedShardId
		if last == nil {
			return shards, out.StreamDescription.StreamStatus, nil
		}
	}
}

func (d *Driver) describeStream(ctx context.Context, arn string, from *string) (*dynamodbstreams.DescribeStreamOutput, error) {
	var out *dynamodbstreams.DescribeStreamOutput
	err := d.retry(ctx, func(int) error {
		var err error
		d.meter.control()
		out, err = d.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: from})
		return err
	})
	if err != nil {
		return nil, d.classifyStream(err)
	}
	if out.StreamDescription == nil {
		return nil, fmt.Errorf("%w: DescribeStream %s returned no description", metastore.ErrUnavailable, arn)
	}
	return out, nil
}

// shardRead is the state of reading one shard.
type shardRead struct {
	arn   string
	shard stypes.Shard
	after string // read records after this sequence number; "" from the start
	// strict makes a trimmed record a gap; a mark's read only looks for
	// the end and tolerates it.
	strict bool
	// upTo, when set, ends the read at the first record created after it;
	// partial also ends it at the first short page.
	upTo    time.Time
	partial bool

	last    string // sequence number of the last record read (or after)
	records int
	closed  bool // the shard is closed and was read to its end
	stopped bool // the read ended at upTo
}

// maxEmptyPages bounds the empty pages read from a closed shard before its
// end: DynamoDB returns empty pages over gaps in a shard.
const maxEmptyPages = 1000

// fullPage is the most records GetRecords returns by default.
const fullPage = 1000

// tipEmptyPages is how many empty pages in a row an open shard must return
// before the read counts as caught up: one empty page may be a gap in the
// shard rather than its tip, and each further page costs one request.
const tipEmptyPages = 3

// readShard reads r's shard from r.after to its end (a closed shard) or to
// tipEmptyPages empty pages in a row (an open one: caught up), adding the keys of its
// records to keys (when not nil).
func (d *Driver) readShard(ctx context.Context, r *shardRead, keys map[string]bool) error {
	r.last = r.after
	id := aws.ToString(r.shard.ShardId)
	closedShard := r.shard.SequenceNumberRange != nil && r.shard.SequenceNumberRange.EndingSequenceNumber != nil
	it, err := d.shardIterator(ctx, r, id)
	if err != nil {
		return err
	}
	empty := 0
	for it != nil {
		var out *dynamodbstreams.GetRecordsOutput
		err := d.retry(ctx, func(int) error {
			var err error
			d.meter.control()
			out, err = d.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
			return err
		})
		var expired *stypes.ExpiredIteratorException
		if errors.As(err, &expired) {
			// Iterators last 15 minutes: continue after the last record.
			if it, err = d.shardIterator(ctx, r, id); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return d.gapOrClassify(r, id, err)
		}
		for _, rec := range out.Records {
			if rec.Dynamodb == nil {
				continue
			}
			if t := rec.Dynamodb.ApproximateCreationDateTime; !r.upTo.IsZero() && t != nil && t.After(r.upTo) {
				r.stopped = true
				return nil // this record and the rest are for the next read
			}
			r.records++
			r.last = aws.ToString(rec.Dynamodb.SequenceNumber)
			if keys == nil {
				continue
			}
			if pk, ok := rec.Dynamodb.Keys[attrPK].(*stypes.AttributeValueMemberS); ok && !metastore.IsControlKey(pk.Value) {
				keys[pk.Value] = true
			}
		}
		it = out.NextShardIterator
		if r.partial && it != nil && len(out.Records) < fullPage {
			r.stopped = true
			return nil
		}
		if len(out.Records) > 0 {
			empty = 0
			continue
		}
		empty++
		if !closedShard && empty >= tipEmptyPages {
			return nil // an open shard, caught up
		}
		if empty > maxEmptyPages {
			return fmt.Errorf("%w: shard %s returned %d empty pages before its end", metastore.ErrUnavailable, id, empty)
		}
	}
	r.closed = true
	return nil
}

// shardIterator starts reading r's shard after r.last, or at the shard's
// first record: AT_SEQUENCE_NUMBER of the shard's start, which DynamoDB
// refuses (TrimmedDataAccessException) once that record is trimmed, so a
// read from the start never silently skips what was trimmed.
func (d *Driver) shardIterator(ctx context.Context, r *shardRead, id string) (*string, error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(r.arn), ShardId: aws.String(id)}
	switch start := ""; {
	case r.last != "":
		in.ShardIteratorType, in.SequenceNumber = stypes.ShardIteratorTypeAfterSequenceNumber, aws.String(r.last)
	case r.shard.SequenceNumberRange != nil && r.shard.SequenceNumberRange.StartingSequenceNumber != nil && r.strict:
		start = aws.ToString(r.shard.SequenceNumberRange.StartingSequenceNumber)
		in.ShardIteratorType, in.SequenceNumber = stypes.ShardIteratorTypeAtSequenceNumber, aws.String(start)
	default:
		in.ShardIteratorType = stypes.ShardIteratorTypeTrimHorizon
	}
	var out *dynamodbstreams.GetShardIteratorOutput
	err := d.retry(ctx, func(int) error {
		var err error
		d.meter.control()
		out, err = d.streams.GetShardIterator(ctx, in)
		return err
	})
	if err != nil {
		return nil, d.gapOrClassify(r, id, err)
	}
	return out.ShardIterator, nil
}

// gapOrClassify turns the errors that mean "records are gone" into
// ErrStreamGap, and the rest into lake's classes.
func (d *Driver) gapOrClassify(r *shardRead, id string, err error) error {
	var trimmed *stypes.TrimmedDataAccessException
	var gone *stypes.ResourceNotFoundException
	switch {
	case errors.As(err, &trimmed):
		return fmt.Errorf("%w: records of shard %s after %q were trimmed (records are kept 24 hours): %v", ErrStreamGap, id, r.last, err)
	case errors.As(err, &gone):
		return fmt.Errorf("%w: shard %s is gone: %v", ErrStreamGap, id, err)
	}
	return d.classifyStream(err)
}

// classifyStream classifies a streams error: a stream or shard that does
// not exist is a gap; the rest as DynamoDB's errors are.
func (d *Driver) classifyStream(err error) error {
	var gone *stypes.ResourceNotFoundException
	if errors.As(err, &gone) {
		return fmt.Errorf("%w: %v", ErrStreamGap, err)
	}
	return d.classify(err, d.v1)
}

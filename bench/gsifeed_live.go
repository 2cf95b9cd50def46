package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/lakemeta/lake/internal/ddb"
)

// GSIFeed is the seed's original index kept live beside a datastore, for
// `lake bench sync --pull full` on DynamoDB: every commit writes one item
// per changed file into the table, under the GSI partition "FILE", and
// every pull queries that one partition whole, filtering updatedAt
// client-side or, with the quick patch, in a FilterExpression.
type GSIFeed struct{ g gsiFeed }

// OpenGSIFeed returns the GSI feed of table, creating the table (and
// waiting for it) if it does not exist.
func OpenGSIFeed(ctx context.Context, api ddb.API, table string) (*GSIFeed, error) {
	_, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var nf *types.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		if err := createGSIFeed(ctx, api, table); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("lake: describe table %s: %w", table, err)
	}
	return &GSIFeed{gsiFeed{api: api, table: table}}, nil
}

// Record writes the index items of paths, updated at at (the writer's
// clock, as the seed's design did).
func (f *GSIFeed) Record(ctx context.Context, paths []string, at time.Time) error {
	return retryTransport(ctx, func() error { return f.g.load(ctx, paths, at) })
}

// Pull reads the whole partition "FILE" and returns the items DynamoDB
// read and those changed after watermark.
func (f *GSIFeed) Pull(ctx context.Context, watermark time.Time, filtered bool) (itemsRead int64, changes int, err error) {
	var row FeedRow
	err = retryTransport(ctx, func() (err error) {
		row, err = f.g.pull(ctx, "", watermark, filtered)
		return err
	})
	return row.ItemsRead, row.Changes, err
}

// retryTransport retries fn, up to 3 attempts in all, when it fails
// without an answer from DynamoDB (a connection dropped mid-response),
// as the SDK's standard retryer would for the seed's client: lake's
// clients retry in the drivers, and this baseline is no driver. Both of
// its writes and its read are idempotent.
func retryTransport(ctx context.Context, fn func() error) error {
	var err error
	for attempt := range 3 {
		if err = fn(); err == nil || ctx.Err() != nil {
			return err
		}
		var api smithy.APIError
		if errors.As(err, &api) {
			return err
		}
		time.Sleep(time.Duration(attempt+1) * 50 * time.Millisecond)
	}
	return err
}

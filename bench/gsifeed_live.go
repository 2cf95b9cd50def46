package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/backend/dynamostore"
)

// GSIFeed is the seed's original index kept live beside a datastore, for
// `lake bench sync --pull full` on DynamoDB: every commit writes one item
// per changed file into the table, under the GSI partition "FILE", and
// every pull queries that one partition whole, filtering updatedAt
// client-side or, with the quick patch, in a FilterExpression.
type GSIFeed struct{ g gsiFeed }

// OpenGSIFeed returns the GSI feed of table, creating the table (and
// waiting for it) if it does not exist.
func OpenGSIFeed(ctx context.Context, api dynamostore.API, table string) (*GSIFeed, error) {
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
	return f.g.load(ctx, paths, at)
}

// Pull reads the whole partition "FILE" and returns the items DynamoDB
// read and those changed after watermark.
func (f *GSIFeed) Pull(ctx context.Context, watermark time.Time, filtered bool) (itemsRead int64, changes int, err error) {
	row, err := f.g.pull(ctx, "", watermark, filtered)
	return row.ItemsRead, row.Changes, err
}

package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
)

// GSIFeedSuffix names the baseline table of `lake bench datafeed`: the
// design seed 004 started from, rebuilt here to be measured.
const GSIFeedSuffix = "_gsifeed"

// gsiFeed is the seed's original design: one metadata item per file, and a
// GSI whose partition key is "FILE" for every item and whose sort key is the
// path. "What changed since my last sync" queries that one partition, all of
// it, and filters on updatedAt (the writer's clock) client-side; the seed's
// quick patch moves the filter into a FilterExpression, which DynamoDB still
// evaluates after reading every item. A GSI cannot be read consistently.
type gsiFeed struct {
	api   ddb.API
	table string
}

func createGSIFeed(ctx context.Context, api ddb.API, table string) error {
	s := aws.String
	_, err := api.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   s(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: s("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: s("gsi1pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: s("gsi1sk"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{{AttributeName: s("pk"), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: s("gsi1"),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: s("gsi1pk"), KeyType: types.KeyTypeHash},
				{AttributeName: s("gsi1sk"), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}},
	})
	if err != nil {
		return fmt.Errorf("lake: create table %s: %w", table, err)
	}
	w := dynamodb.NewTableExistsWaiter(api)
	return w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: s(table)}, 2*time.Minute)
}

// load writes a metadata item per path, updatedAt = at, 25 to a request.
func (g *gsiFeed) load(ctx context.Context, paths []string, at time.Time) error {
	for start := 0; start < len(paths); start += 25 {
		var reqs []types.WriteRequest
		for _, p := range paths[start:min(start+25, len(paths))] {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
				"pk":        &types.AttributeValueMemberS{Value: p},
				"gsi1pk":    &types.AttributeValueMemberS{Value: "FILE"},
				"gsi1sk":    &types.AttributeValueMemberS{Value: p},
				"updatedAt": &types.AttributeValueMemberN{Value: strconv.FormatInt(at.UnixMilli(), 10)},
				"size":      &types.AttributeValueMemberN{Value: "0"},
			}}})
		}
		for attempt := 0; len(reqs) > 0; attempt++ {
			if attempt > 20 {
				return fmt.Errorf("lake: baseline load: items stayed unprocessed")
			}
			out, err := g.api.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{g.table: reqs}})
			if err != nil {
				return fmt.Errorf("lake: baseline load: %w", err)
			}
			reqs = out.UnprocessedItems[g.table]
		}
	}
	return nil
}

// pull is the seed's "what changed since watermark" under prefix ("" for
// every model): the GSI's one partition, all pages; with filtered, the quick
// patch's FilterExpression on updatedAt, else the client-side filter.
func (g *gsiFeed) pull(ctx context.Context, prefix string, watermark time.Time, filtered bool) (FeedRow, error) {
	kc := expression.Key("gsi1pk").Equal(expression.Value("FILE"))
	if prefix != "" {
		kc = kc.And(expression.Key("gsi1sk").BeginsWith(prefix))
	}
	b := expression.NewBuilder().WithKeyCondition(kc)
	design := "seed-gsi"
	if filtered {
		b = b.WithFilter(expression.Name("updatedAt").GreaterThan(expression.Value(watermark.UnixMilli())))
		design = "seed-gsi+filter"
	}
	e, err := b.Build()
	if err != nil {
		return FeedRow{}, err
	}
	in := &dynamodb.QueryInput{TableName: aws.String(g.table), IndexName: aws.String("gsi1"), KeyConditionExpression: e.KeyCondition(),
		FilterExpression: e.Filter(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal}
	row := FeedRow{Design: design}
	start := time.Now()
	for {
		out, err := g.api.Query(ctx, in)
		if err != nil {
			return FeedRow{}, fmt.Errorf("lake: baseline pull: %w", err)
		}
		row.Requests++
		row.ItemsRead += int64(out.ScannedCount)
		if out.ConsumedCapacity != nil {
			row.ReadUnits += aws.ToFloat64(out.ConsumedCapacity.CapacityUnits)
		}
		for _, it := range out.Items {
			n, _ := strconv.ParseInt(it["updatedAt"].(*types.AttributeValueMemberN).Value, 10, 64)
			if n > watermark.UnixMilli() {
				row.Changes++
			}
		}
		if out.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	row.Wall = time.Since(start)
	return row, nil
}

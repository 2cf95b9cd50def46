package dynamostore

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
)

// batchSize is BatchWriteItem's limit of items per request.
const batchSize = 25

// Load writes items unconditionally with BatchWriteItem, 25 to a request,
// for seeding benchmarks and test fixtures quickly. It is not a contract
// operation: it skips the idempotency token (items carry the write id
// "load"), so use it only on data nobody else writes at the same time. Keys
// and values are validated as the Store would.
func (d *Driver) Load(ctx context.Context, items []metastore.Item) error {
	t := tV1
	switch d.layout {
	case LayoutV2:
		t = tV2
	case LayoutAuto:
		return fmt.Errorf("%w: Load needs a forced layout (v1 or v2)", metastore.ErrInvalidArgument)
	}
	families := map[string]bool{}
	for _, it := range items {
		if err := metastore.ValidateKey(it.Key); err != nil {
			return err
		}
		if err := metastore.ValidateValue(it.Value); err != nil {
			return err
		}
		families[metastore.Family(it.Key)] = true
	}
	for _, f := range slices.Sorted(maps.Keys(families)) {
		if err := d.registerFamily(ctx, f); err != nil {
			return err
		}
	}
	for start := 0; start < len(items); start += batchSize {
		var reqs []types.WriteRequest
		for _, it := range items[start:min(start+batchSize, len(items))] {
			item := d.keyIn(t, it.Key)
			item[attrValue] = &types.AttributeValueMemberB{Value: it.Value}
			item[attrWrite] = &types.AttributeValueMemberS{Value: "load"}
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		}
		table := d.tableName(t)
		pending := map[string][]types.WriteRequest{table: reqs}
		// Unprocessed items are retried (with the retryer's backoff) until
		// none remain or the attempts run out.
		err := d.retry(ctx, func(int) error {
			out, err := d.api.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
				RequestItems: pending, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
			})
			if err != nil {
				return err
			}
			d.meter.request("BatchWriteItem", 0, 0, out.ConsumedCapacity...)
			if len(out.UnprocessedItems) == 0 {
				return nil
			}
			pending = out.UnprocessedItems
			return &types.ProvisionedThroughputExceededException{Message: aws.String(fmt.Sprintf("%d items unprocessed", len(pending[table])))}
		})
		if err != nil {
			return d.classify(err, table)
		}
	}
	return nil
}

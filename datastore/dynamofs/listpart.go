package dynamofs

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lakemeta/lake/datastore"
)

var _ datastore.PartitionLister = (*Driver)(nil)

// ListPartition implements datastore.PartitionLister: one Query of the
// partition's item collection (its files, tombstones skipped), never the
// registry, whatever the layout. pos is the last path read.
func (d *Driver) ListPartition(ctx context.Context, partition, prefix string, limit int, pos []byte) ([]datastore.Info, []byte, error) {
	kc := expression.Key(attrPK).Equal(expression.Value(d.filePK(partition)))
	if prefix != "" {
		kc = kc.And(expression.Key(attrSK).BeginsWith(prefix))
	}
	e, err := build(expression.NewBuilder().WithKeyCondition(kc))
	if err != nil {
		return nil, nil, err
	}
	in := &dynamodb.QueryInput{KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(),
		ExpressionAttributeValues: e.Values(), Limit: aws32(limit)}
	if pos != nil {
		in.ExclusiveStartKey = key(d.filePK(partition), string(pos))
	}
	out, err := d.query(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	var files []datastore.Info
	for _, it := range out.Items {
		if info := fileInfo(it); !info.Deleted {
			files = append(files, info)
		}
	}
	if out.LastEvaluatedKey == nil {
		return files, nil, nil
	}
	return files, []byte(getS(out.LastEvaluatedKey, attrSK)), nil
}

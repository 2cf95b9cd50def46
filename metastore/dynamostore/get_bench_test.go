package dynamostore_test

import (
	"slices"
	"time"

	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
)

// BenchmarkGet compares a store's point read with the raw GetItem it makes,
// on one v2 table (run with -cpuprofile to see where lake's share goes).
func BenchmarkGet(b *testing.B) {
	api := client(b)
	opts := newTables(b, api, dynamostore.LayoutV2)
	s := metastore.New(openDriver(b, api, opts))
	ctx := b.Context()
	if err := s.Put(ctx, "tbl/x", []byte("a catalog entry")); err != nil {
		b.Fatal(err)
	}
	b.Run("lake", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Get(ctx, "tbl/x"); err != nil {
				b.Fatal(err)
			}
		}
	})
	raw := func(projection *string) func(b *testing.B) {
		return func(b *testing.B) {
			in := &dynamodb.GetItemInput{ProjectionExpression: projection, TableName: aws.String(opts.Table + dynamostore.V2Suffix), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{
					"bucket": &types.AttributeValueMemberS{Value: "tbl#000"},
					"pk":     &types.AttributeValueMemberS{Value: "tbl/x"},
				}, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal}
			for b.Loop() {
				if _, err := api.GetItem(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("raw", raw(nil))
	b.Run("raw-projection", raw(aws.String("v")))
}

// BenchmarkGetInterleaved times a store's Get, a raw GetItem and a raw
// GetItem with the projection lake used to send, one after the other in each
// iteration so that all three see the same machine, and reports the p50 of
// each (in µs).
func BenchmarkGetInterleaved(b *testing.B) {
	api := client(b)
	opts := newTables(b, api, dynamostore.LayoutV2)
	s := metastore.New(openDriver(b, api, opts))
	ctx := b.Context()
	if err := s.Put(ctx, "tbl/x", []byte("a catalog entry")); err != nil {
		b.Fatal(err)
	}
	in := func(projection *string) *dynamodb.GetItemInput {
		return &dynamodb.GetItemInput{TableName: aws.String(opts.Table + dynamostore.V2Suffix), ConsistentRead: aws.Bool(true),
			ProjectionExpression: projection,
			Key: map[string]types.AttributeValue{
				"bucket": &types.AttributeValueMemberS{Value: "tbl#000"},
				"pk":     &types.AttributeValueMemberS{Value: "tbl/x"},
			}, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal}
	}
	plain, proj := in(nil), in(aws.String("v"))
	var tl, tr, tp []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := s.Get(ctx, "tbl/x"); err != nil {
			b.Fatal(err)
		}
		tl = append(tl, time.Since(start))
		start = time.Now()
		if _, err := api.GetItem(ctx, plain); err != nil {
			b.Fatal(err)
		}
		tr = append(tr, time.Since(start))
		start = time.Now()
		if _, err := api.GetItem(ctx, proj); err != nil {
			b.Fatal(err)
		}
		tp = append(tp, time.Since(start))
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds())
	}
	b.ReportMetric(p50(tl), "lake-p50-µs")
	b.ReportMetric(p50(tr), "raw-p50-µs")
	b.ReportMetric(p50(tp), "raw-projection-p50-µs")
}

package dynamostore_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/metastore/storetest"
)

func TestConformanceV1(t *testing.T) {
	storetest.RunConformanceTests(t, func(t *testing.T) *metastore.Store { return newStore(t, dynamostore.LayoutV1) })
}

func TestConformanceV2(t *testing.T) {
	storetest.RunConformanceTests(t, func(t *testing.T) *metastore.Store { return newStore(t, dynamostore.LayoutV2) })
}

// client returns a non-retrying client of DynamoDB Local.
func client(t testing.TB) *dynamodb.Client {
	return ddb.NewClient(ddblocal.Config(t), "")
}

// newTables creates fresh tables for layout and deletes them after the test.
func newTables(t testing.TB, api ddb.API, layout dynamostore.Layout) dynamostore.Options {
	return ddblocal.Tables(t, api, dynamostore.Options{Layout: layout})
}

func openDriver(t testing.TB, api ddb.API, opts dynamostore.Options) *dynamostore.Driver {
	d, err := dynamostore.Open(context.Background(), api, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return d
}

func newStore(t testing.TB, layout dynamostore.Layout) *metastore.Store {
	api := client(t)
	s := metastore.New(openDriver(t, api, newTables(t, api, layout)))
	t.Cleanup(func() { s.Close() })
	return s
}

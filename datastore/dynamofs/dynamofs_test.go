package dynamofs_test

import (
	"testing"

	"github.com/lakemeta/lake/backend/dynamostore"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dstest"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// newDriver creates a fresh table on DynamoDB Local and opens it.
func newDriver(t *testing.T) *dynamofs.Driver {
	t.Helper()
	api := dynamostore.NewClient(ddblocal.Config(t), "")
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
	d, err := dynamofs.Open(t.Context(), api, dynamofs.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func newStore(t *testing.T) *datastore.Store {
	s := datastore.New(newDriver(t))
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	dstest.RunConformanceTests(t, newStore)
}

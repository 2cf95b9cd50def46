package dynamofs_test

import (
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dstest"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore/dynamostore"
)

// newSmallStore is a store whose one-write fast path holds max entries, so
// that commits of a few more go through the commit record (whole.go).
func newSmallStore(t *testing.T, max int) (*datastore.Store, *dynamofs.Driver) {
	t.Helper()
	api := dynamostore.NewClient(ddblocal.Config(t), "")
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
	d, err := dynamofs.Open(t.Context(), api, dynamofs.Options{Table: table, MaxCommit: max})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	return s, d
}

// TestKilledCommitsSmallMax kills commits of 10 entries with MaxCommit 4
// after every number of writes (issue 30).
func TestKilledCommitsSmallMax(t *testing.T) {
	s, _ := newSmallStore(t, 4)
	dstest.RunKilledCommits(t, s)
}

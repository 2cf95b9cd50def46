package catalog

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore"
)

// TestFoldCursorOverOwnCommit (DynamoDB, issue 31): a fold told the
// caller's commit, right after the caller read the index, takes the
// changed partitions from that commit without reading the index; another
// process's commit on another shard in between is left to the next fold,
// which folds it (never lost); one on the commit's own shard makes the fold
// read. The rows are the listing's every time.
func TestFoldCursorOverOwnCommit(t *testing.T) {
	ctx := t.Context()
	c, table := datastoreTable(t)
	open := func() *datastore.Store {
		ns, err := dynamoDatastore(t, c, table).Namespace("over")
		if err != nil {
			t.Fatal(err)
		}
		return ns
	}
	ns, other := open(), open()
	const lock = "test/fold-fence"
	if err := ns.Records().CASRecord(ctx, lock, metastore.ExpectAbsent(), []byte("t")); err != nil {
		t.Fatal(err)
	}
	fence := &datastore.Fence{Key: lock, Token: []byte("t")}
	// mine and sameShard share a shard; elsewhere has its own.
	var mine, sameShard, elsewhere string
	for i := 0; sameShard == "" || elsewhere == ""; i++ {
		m := fmt.Sprintf("m/%d", i)
		switch {
		case mine == "":
			mine = m
		case dynamofs.ShardOf(m) == dynamofs.ShardOf(mine):
			if sameShard == "" {
				sameShard = m
			}
		case elsewhere == "":
			elsewhere = m
		}
	}
	r := newFoldRun(t, ns, fence)
	put := r.put
	fold := func(committed []datastore.Info, wantOver bool, wantRows ...string) {
		t.Helper()
		r.fold(FoldOptions{Committed: committed}, wantOver, wantRows...)
	}
	pull := func() { t.Helper(); r.pull() }
	for _, m := range []string{mine, sameShard, elsewhere} {
		put(ns, m)
	}
	fold(nil, false, mine, sameShard, elsewhere)

	pull()
	own := put(ns, mine)
	fold(own, true, mine)

	// Another process's commit on another shard in between: the fold
	// over the commit leaves it; the next fold folds it.
	pull()
	put(other, elsewhere)
	own = put(ns, mine)
	fold(own, true, mine)
	pull()
	fold(nil, false, elsewhere)

	// On the commit's own shard: the fold reads, and folds both.
	pull()
	put(other, sameShard)
	own = put(ns, mine)
	fold(own, false, mine, sameShard)
}

// datastoreTable creates a datastore table on DynamoDB Local for t, deleted
// after it.
func datastoreTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	c := ddblocal.Client(t)
	table := ddblocal.TableName(t) + dynamofs.TableSuffix
	t.Cleanup(func() {
		c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	if err := dynamofs.Create(t.Context(), c, table); err != nil {
		t.Fatal(err)
	}
	return c, table
}

// dynamoDatastore opens table's datastore through c, closed when t ends.
func dynamoDatastore(t *testing.T, c *dynamodb.Client, table string) *datastore.Store {
	t.Helper()
	d, err := dynamofs.Open(t.Context(), c, dynamofs.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := datastore.Open(t.Context(), d, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ds.Close() })
	return ds
}

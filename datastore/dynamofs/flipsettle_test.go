package dynamofs_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore"
)

// flipAPI sees each TransactWriteItems: it notes the one that flips a
// staged commit (an update of a commit record's state, "st") with the
// items it carries, and runs a hook (once) right before sending it.
type flipAPI struct {
	ddb.API
	beforeFlip atomic.Pointer[func()]
	flip       atomic.Pointer[[]types.TransactWriteItem]
}

func (f *flipAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	for _, w := range in.TransactItems {
		if w.Update != nil && slices.Contains(mapValues(w.Update.ExpressionAttributeNames), "st") {
			items := in.TransactItems
			f.flip.Store(&items)
			if h := f.beforeFlip.Swap(nil); h != nil {
				(*h)()
			}
			break
		}
	}
	return f.API.TransactWriteItems(ctx, in, o...)
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestFlipRidesFirstSettle (issue 31): a staged commit's flip is sent in
// the same transaction as the settling of its first files, not alone
// before them; if the lock moved on before it, that transaction fails on
// the fence's check as a whole: a fence conflict, nothing of the commit
// visible, nothing settled, the staged items rolled back.
func TestFlipRidesFirstSettle(t *testing.T) {
	ctx := t.Context()
	api := &flipAPI{API: ddb.NewClient(ddblocal.Config(t), "")}
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
	d, err := dynamofs.Open(ctx, api, dynamofs.Options{Table: table, MaxCommit: 4})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	rec := s.Records()
	if err := rec.CASRecord(ctx, "lock/rec/ns/sync", metastore.ExpectAbsent(), []byte("t1")); err != nil {
		t.Fatal(err)
	}

	if _, err := s.Commit(ctx, &datastore.Fence{Key: "lock/rec/ns/sync", Token: []byte("t1")}, uploadAll(t, s, "data/w/1", 10, "one")); err != nil {
		t.Fatal(err)
	}
	flip := api.flip.Load()
	if flip == nil {
		t.Fatal("no flip seen: the commit was not staged")
	}
	settles := 0
	for _, w := range *flip {
		if w.Update != nil && slices.Contains(mapValues(w.Update.ExpressionAttributeNames), "tx") {
			settles++
		}
	}
	if settles != 10 {
		t.Fatalf("the flip's transaction settled %d files; want all 10 with it (%d items)", settles, len(*flip))
	}
	if files, err := s.ListAll(ctx, "data/w/"); err != nil || len(files) != 10 {
		t.Fatalf("after the commit %d files are listed (%v)", len(files), err)
	}

	// The lock moves on right before the next commit's flip.
	moved := func() {
		if err := rec.CASRecord(ctx, "lock/rec/ns/sync", metastore.ExpectValue([]byte("t1")), []byte("t2")); err != nil {
			t.Error(err)
		}
	}
	api.beforeFlip.Store(&moved)
	_, err = s.Commit(ctx, &datastore.Fence{Key: "lock/rec/ns/sync", Token: []byte("t1")}, uploadAll(t, s, "data/w/2", 10, "two"))
	if !datastore.IsFenceConflict(err) {
		t.Fatalf("a commit whose lock moved on before its flip: %v; want a fence conflict", err)
	}
	if files, err := s.ListAll(ctx, "data/w/2/"); err != nil || len(files) != 0 {
		t.Fatalf("the refused commit's files are listed: %d (%v)", len(files), err)
	}
	if left := stagedLeft(t, table); len(left) != 0 {
		t.Fatalf("the refused commit left behind: %v", left)
	}
}

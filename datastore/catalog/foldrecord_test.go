package catalog

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/metastore"
)

// TestFoldCursorWithTheRows (DynamoDB, issue 31): the fold's cursor is
// written in the rows' own fenced transaction; a holder that lost the lock
// writes neither rows nor cursor; a cursor record a hostile peer deleted
// with the raw SDK under a remembered cursor refuses the combined commit,
// and the fold still ends with every row right and the record at its
// cursor.
func TestFoldCursorWithTheRows(t *testing.T) {
	ctx := t.Context()
	c, table := datastoreTable(t)
	d, err := dynamofs.Open(ctx, c, dynamofs.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := datastore.Open(ctx, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	ns, err := ds.Namespace("cur")
	if err != nil {
		t.Fatal(err)
	}
	recs, key := ns.Records(), cursorKey("cur")
	const lock = "test/fold-fence"
	if err := recs.CASRecord(ctx, lock, metastore.ExpectAbsent(), []byte("token-1")); err != nil {
		t.Fatal(err)
	}
	fence := &datastore.Fence{Key: lock, Token: []byte("token-1")}
	cat, err := ns.CatalogStore()
	if err != nil {
		t.Fatal(err)
	}
	files := func(want int) {
		t.Helper()
		r, ok := readRow(t, cat, "cur", "m/1")
		if !ok || r.Files != want {
			t.Fatalf("row %+v (%v); want %d files", r, ok, want)
		}
	}
	record := func() string {
		t.Helper()
		v, err := recs.GetRecord(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	if _, err := ns.Put(ctx, "data/m/1/a", strings.NewReader("a"), nil); err != nil {
		t.Fatal(err)
	}
	st, err := FoldWith(ctx, ns, fence, FoldOptions{})
	if err != nil || st.Rows != 1 || st.Cursor == "" || record() != st.Cursor {
		t.Fatalf("fold: %+v, %v; record %q", st, err, record())
	}
	files(1)
	cursor := st.Cursor

	// The lock changes hands: the old holder writes nothing.
	if err := recs.CASRecord(ctx, lock, metastore.ExpectValue([]byte("token-1")), []byte("token-2")); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Put(ctx, "data/m/1/b", strings.NewReader("b"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := FoldWith(ctx, ns, fence, FoldOptions{Cursor: cursor}); !datastore.IsFenceConflict(err) {
		t.Fatalf("fold with a lost fence: %v; want a fence conflict", err)
	}
	if record() != cursor {
		t.Fatalf("the cursor moved under a lost fence")
	}
	files(1)

	// A hostile peer deletes the cursor's record with the raw SDK; the
	// new holder's fold remembers the old cursor.
	fence = &datastore.Fence{Key: lock, Token: []byte("token-2")}
	if _, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "k#datastore/catalog"}, "sk": &types.AttributeValueMemberS{Value: key}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := recs.GetRecord(ctx, key); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("the raw delete left the record: %v", err)
	}
	st, err = FoldWith(ctx, ns, fence, FoldOptions{Cursor: cursor})
	if err != nil || st.Cursor == "" || record() != st.Cursor {
		t.Fatalf("fold after the record's delete: %+v, %v; record %q", st, err, record())
	}
	files(2)
}

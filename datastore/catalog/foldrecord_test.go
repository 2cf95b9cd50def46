package catalog

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dsurl"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
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
	f := newFoldFixture(t, dynamoDatastore(t, c, table))
	ns, recs, key, lock, fence, files, record := f.ns, f.recs, f.key, f.lock, f.fence, f.files, f.record
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

// TestFoldCursorAfterItsCommit (issue 31), on every backend: right after
// the fold's own fenced commit of its rows the cursor moves by its
// compare-and-swap alone (S3: one conditional write instead of a read,
// the write and a read); a fold of a holder that lost the lock commits no
// row and moves no cursor, whether its changes need rows (its commit is
// refused) or not (the move is fenced then); the new holder's fold
// brings the catalog and the cursor up to date; and on DynamoDB and S3 a
// cursor record a foreign client overwrote with the raw SDK is refused at
// the compare-and-swap and replaced by a fold from the record's value.
func TestFoldCursorAfterItsCommit(t *testing.T) {
	for _, b := range []string{"bolt", "dynamodb", "s3"} {
		t.Run(b, func(t *testing.T) {
			ctx := t.Context()
			var d datastore.Driver
			var forge func(key string, value []byte) // a raw write of a record, as a foreign client makes it
			switch b {
			case "bolt":
				ds, err := dsurl.Open(ctx, "bolt://"+filepath.Join(t.TempDir(), "lake.db"), &dsurl.Options{Create: true})
				if err != nil {
					t.Fatal(err)
				}
				defer ds.Close()
				d = ds.Driver()
			case "dynamodb":
				c, table := datastoreTable(t)
				dd, err := dynamofs.Open(ctx, c, dynamofs.Options{Table: table})
				if err != nil {
					t.Fatal(err)
				}
				d = dd
				forge = func(key string, value []byte) {
					if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
						"pk": &types.AttributeValueMemberS{Value: "k#datastore/catalog"}, "sk": &types.AttributeValueMemberS{Value: key},
						"v": &types.AttributeValueMemberB{Value: value}}}); err != nil {
						t.Fatal(err)
					}
				}
			case "s3":
				c, bucket := s3local.Client(t), s3local.Bucket(t)
				sd, err := s3fs.Open(ctx, c, s3fs.Options{Bucket: bucket, Prefix: "cur"})
				if err != nil {
					t.Fatal(err)
				}
				d = sd
				forge = func(key string, value []byte) {
					if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("cur/r/" + key + "~"), Body: bytes.NewReader(value)}); err != nil {
						t.Fatal(err)
					}
				}
			}
			ds, err := datastore.Open(ctx, d, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			f := newFoldFixture(t, ds)
			ns, recs, lock, fence, files, record := f.ns, f.recs, f.lock, f.fence, f.files, f.record
			put := func(p string) {
				t.Helper()
				if _, err := ns.Put(ctx, p, strings.NewReader(p), nil); err != nil {
					t.Fatal(err)
				}
			}
			put("data/m/1/a")
			st, err := FoldWith(ctx, ns, fence, FoldOptions{})
			if err != nil || st.Rows != 1 || st.Cursor == "" || record() != st.Cursor {
				t.Fatalf("fold: %+v, %v", st, err)
			}
			files(1)
			put("data/m/1/b")
			st, err = FoldWith(ctx, ns, fence, FoldOptions{Cursor: st.Cursor})
			if err != nil || st.Rows != 1 || record() != st.Cursor {
				t.Fatalf("second fold: %+v, %v", st, err)
			}
			files(2)
			cursor := st.Cursor

			// The lock changes hands. The lost holder's fold of a model
			// change is refused at its commit; of a change that needs
			// no row (a file outside every model), at the cursor's
			// fenced move. Neither moves the cursor.
			if err := recs.CASRecord(ctx, lock, metastore.ExpectValue([]byte("token-1")), []byte("token-2")); err != nil {
				t.Fatal(err)
			}
			put("data/top")
			if _, err := FoldWith(ctx, ns, fence, FoldOptions{Cursor: cursor}); !datastore.IsFenceConflict(err) {
				t.Fatalf("a lost holder's fold of a change needing no row: %v; want a fence conflict", err)
			}
			if record() != cursor {
				t.Fatal("a lost holder moved the cursor past a change needing no row")
			}
			put("data/m/1/c")
			if _, err := FoldWith(ctx, ns, fence, FoldOptions{Cursor: cursor}); !datastore.IsFenceConflict(err) {
				t.Fatalf("a lost holder's fold of a model change: %v; want a fence conflict", err)
			}
			if record() != cursor {
				t.Fatal("a lost holder moved the cursor past a model change")
			}
			files(2)

			fence = &datastore.Fence{Key: lock, Token: []byte("token-2")}
			st, err = FoldWith(ctx, ns, fence, FoldOptions{Cursor: cursor})
			if err != nil || st.Rows != 1 || record() != st.Cursor || st.Cursor == cursor {
				t.Fatalf("the new holder's fold: %+v, %v", st, err)
			}
			files(3)

			// A foreign client overwrites the cursor's record with
			// bytes lake never wrote; the holder's next fold, which
			// remembers its own cursor, is refused at the record's
			// compare-and-swap, folds again from the record's value
			// (not a cursor: every partition) and leaves a cursor of
			// its own there, the rows right.
			if forge != nil {
				forge(f.key, []byte("not a cursor"))
				if record() != "not a cursor" {
					t.Fatalf("the raw write left the record %q", record())
				}
				put("data/m/1/d")
				st, err = FoldWith(ctx, ns, fence, FoldOptions{Cursor: st.Cursor})
				if err != nil || record() != st.Cursor || st.Cursor == "" {
					t.Fatalf("the fold over a forged cursor record: %+v, %v; record %q", st, err, record())
				}
				files(4)
			}
		})
	}
}

// foldFixture is namespace "cur" of a datastore with a lock record
// holding "token-1" and that token's fence, and readers of the cursor's
// record and of model m/1's row.
type foldFixture struct {
	ns        *datastore.Store
	recs      datastore.Records
	key, lock string
	fence     *datastore.Fence
	files     func(want int)
	record    func() string
}

func newFoldFixture(t *testing.T, ds *datastore.Store) foldFixture {
	t.Helper()
	ctx := t.Context()
	ns, err := ds.Namespace("cur")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := ns.CatalogStore()
	if err != nil {
		t.Fatal(err)
	}
	f := foldFixture{ns: ns, recs: ns.Records(), key: cursorKey("cur"), lock: "test/fold-fence"}
	if err := f.recs.CASRecord(ctx, f.lock, metastore.ExpectAbsent(), []byte("token-1")); err != nil {
		t.Fatal(err)
	}
	f.fence = &datastore.Fence{Key: f.lock, Token: []byte("token-1")}
	f.record = func() string {
		t.Helper()
		v, err := f.recs.GetRecord(ctx, f.key)
		if err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	f.files = func(want int) {
		t.Helper()
		r, ok := readRow(t, cat, "cur", "m/1")
		if !ok || r.Files != want {
			t.Fatalf("row %+v (%v); want %d files", r, ok, want)
		}
	}
	return f
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// TestRememberedLayoutStaleAtTheCommit (issue 31): on DynamoDB a sync that
// pushes a change proves the layout its tree remembers in its commit's own
// transaction, not by a read first. A hostile peer (the raw SDK) rewrites
// the layout record to type-id, as a datastore recreated under the same URL
// would record it. The next sync's commit, filed with the remembered models
// layout, is refused whole (nothing is written in the models partition),
// the tree forgets the layout, and lake syncs again with the record read:
// the new file is committed in its type-id partition.
func TestRememberedLayoutStaleAtTheCommit(t *testing.T) {
	table := ddblocal.TableName(t)
	store := "dynamodb://" + table + "?endpoint=" + ddblocal.Endpoint(t)
	t.Cleanup(func() { deleteDataTable(t, store) })
	dir, tree := t.TempDir(), t.TempDir()
	lake := func(wd string, args ...string) result {
		t.Helper()
		return run(t, wd, "", append([]string{"--store", store}, args...)...)
	}
	ok(t, lake(dir, "data", "init"))
	ok(t, lake(tree, "data", "sync"))
	if b, err := os.ReadFile(filepath.Join(tree, ".lake", "layout")); err != nil || string(b) != "models" {
		t.Fatalf("the tree remembers %q (%v), want models", b, err)
	}
	raw, files := ddblocal.Client(t), table+dynamofs.TableSuffix
	if _, err := raw.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &files, Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "k#" + datastore.LayoutKey}, "sk": &types.AttributeValueMemberS{Value: datastore.LayoutKey},
		"v": &types.AttributeValueMemberB{Value: []byte("type-id")}}}); err != nil {
		t.Fatal(err)
	}
	// data/x/y/z/w/1/new: partition x/y/z under models, x/y under type-id.
	p := filepath.Join(tree, "data", "x", "y", "z", "w", "1", "new")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("pushed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, lake(tree, "data", "sync"))
	if r := ok(t, lake(dir, "data", "stat", "data/x/y/z/w/1/new")); !strings.Contains(r.stdout, `"partition":"x/y"`) {
		t.Fatalf("the pushed file: %s; want it in the type-id partition x/y", r.stdout)
	}
	got, err := raw.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &files, ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "f#x/y/z"}, "sk": &types.AttributeValueMemberS{Value: "data/x/y/z/w/1/new"}}})
	if err != nil || len(got.Item) != 0 {
		t.Fatalf("the models partition holds %v (%v); want nothing written with the stale layout", got.Item, err)
	}
	if b, err := os.ReadFile(filepath.Join(tree, ".lake", "layout")); err != nil || string(b) != "type-id" {
		t.Fatalf("the tree remembers %q (%v), want type-id", b, err)
	}
}

// TestRememberedLayoutStaleUnderAConflict: a sync whose remembered layout is
// stale and that fails before anything proved it (here a conflict: the
// synced file is changed locally and gone from the recreated datastore)
// still forgets the layout (and syncs again with the record read), so that
// the next sync does not decide with the stale layout again.
func TestRememberedLayoutStaleUnderAConflict(t *testing.T) {
	dir, tree := t.TempDir(), t.TempDir()
	db := filepath.Join(dir, "lake.db")
	store := "bolt://" + db
	lake := func(wd string, args ...string) result {
		t.Helper()
		return run(t, wd, "", append([]string{"--store", store}, args...)...)
	}
	ok(t, lake(dir, "data", "init"))
	p := filepath.Join(tree, "data", "a", "b", "c", "d", "1", "raw")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, lake(tree, "data", "sync"))
	recreateWithLayout(t, db, "type-id")
	if err := os.WriteFile(p, []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := lake(tree, "data", "sync"); r.code == 0 {
		t.Fatalf("a sync of a file changed here and gone remotely succeeded: %s", r.stdout)
	}
	// Forgotten (the refused sync remembers nothing new) or the new one.
	if b, err := os.ReadFile(filepath.Join(tree, ".lake", "layout")); string(b) == "models" {
		t.Fatalf("after the refused sync the tree still remembers %q (%v)", b, err)
	}
}

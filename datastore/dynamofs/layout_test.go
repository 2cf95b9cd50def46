package dynamofs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// Under the models layout no prefix under data/ pins a partition, so a
// listing reads the registry; a partition's own files are one Query of its
// item collection, never the registry (issue 30): what the catalog fold and
// a pull's resync read for each changed model.
func TestListPartitionReadsOnePartition(t *testing.T) {
	d := newDriver(t)
	s := datastore.New(d)
	ctx := t.Context()
	for _, p := range []string{"data/command/shell/u1/model.yaml", "data/command/shell/u1/result/1/raw",
		"data/command/shell/u2/result/1/raw", "data/command/shell/u1/1/raw"} {
		if _, err := s.Put(ctx, p, strings.NewReader(p), nil); err != nil {
			t.Fatal(err)
		}
	}
	before := d.Stats()
	files, err := s.ListPartitionAll(ctx, "command/shell/u1", "")
	if err != nil || len(files) != 2 {
		t.Fatalf("ListPartitionAll = %v, %v", files, err)
	}
	if got := d.Stats().Sub(before); got.TotalRequests() != 1 || got.Requests["Query"] != 1 {
		t.Fatalf("ListPartitionAll of one model cost %v, want one Query", got.Requests)
	}
	before = d.Stats()
	listed, err := s.ListAll(ctx, "data/command/shell/u1/")
	if err != nil || len(listed) != 3 {
		t.Fatalf("ListAll = %v, %v", listed, err)
	}
	// Two partitions hold files under data/command/shell/u1/ (u1 and
	// command/shell): each page (one per partition) reads the registry and
	// queries one partition.
	if got := d.Stats().Sub(before); got.Requests["BatchGetItem"] != 2 || got.Requests["Query"] != 2 || got.TotalRequests() != 4 {
		t.Fatalf("ListAll of a model's directory cost %v, want 2 BatchGetItem (the registry) and 2 Query", got.Requests)
	}
}

// A foreign writer (a raw SDK client) sets the layout record: a layout
// lake does not know is refused at Open with a message naming it, never
// read as another layout; one it knows is obeyed, whatever the data.
func TestForeignLayoutRecord(t *testing.T) {
	raw, table, s := rawStore(t)
	ctx := t.Context()
	rec := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k#" + datastore.LayoutKey},
		"sk": &types.AttributeValueMemberS{Value: datastore.LayoutKey}, "v": &types.AttributeValueMemberB{Value: []byte("hash-of-type")}}
	if _, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: rec}); err != nil {
		t.Fatal(err)
	}
	_, err := datastore.Open(ctx, s.Driver(), nil)
	if !errors.Is(err, metastore.ErrInvalidArgument) || !strings.Contains(err.Error(), `"hash-of-type"`) || !strings.HasPrefix(err.Error(), "lake: ") {
		t.Fatalf("Open with a foreign layout record: %v", err)
	}
	rec["v"] = &types.AttributeValueMemberB{Value: []byte("type-id")}
	if _, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: rec}); err != nil {
		t.Fatal(err)
	}
	o, err := datastore.Open(ctx, s.Driver(), nil)
	if err != nil || o.Layout() != datastore.LayoutTypeID {
		t.Fatalf("Open with a type-id record on an empty table: %v, %v", o, err)
	}
	info, err := o.Put(ctx, "data/command/shell/u1/result/1/raw", strings.NewReader("x"), nil)
	if err != nil || info.Partition != "command/shell" {
		t.Fatalf("put under the recorded type-id layout: %+v, %v", info, err)
	}
}

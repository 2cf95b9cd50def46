package dynamofs_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// TestForeignSizeAndChunk (issue 26, hostile peer): a client lake did not
// write (a raw UpdateItem, as boto3 would make) sets a committed file's size
// to a petabyte, and another file's chunk to other bytes. Reads of those
// paths fail with a damaged-file error naming each, without allocating what
// is claimed; other paths read on.
func TestForeignSizeAndChunk(t *testing.T) {
	raw, table, s := rawStore(t)
	ctx := t.Context()
	for _, p := range []string{"data/t/i/huge", "data/t/i/junk", "data/t/i/ok"} {
		content := "hello"
		if p == "data/t/i/junk" {
			content = oneChunk(content) // its chunk is what the peer damages
		}
		if _, err := s.Put(ctx, p, strings.NewReader(content), nil); err != nil {
			t.Fatal(err)
		}
	}
	update := func(pk, sk string, u expression.UpdateBuilder) {
		t.Helper()
		e, err := expression.NewBuilder().WithUpdate(u).Build()
		if err != nil {
			t.Fatal(err)
		}
		_, err = raw.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table,
			Key:              map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}},
			UpdateExpression: e.Update(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()})
		if err != nil {
			t.Fatalf("raw UpdateItem: %v", err)
		}
	}
	update("f#t/i", "data/t/i/huge", expression.Set(expression.Name("size"), expression.Value(1125899906842624)))
	junk, err := s.Stat(ctx, "data/t/i/junk")
	if err != nil {
		t.Fatal(err)
	}
	update("c#"+junk.Version, "00000000", expression.Set(expression.Name("d"), expression.Value([]byte("HELLO"))))
	for _, p := range []string{"data/t/i/huge", "data/t/i/junk"} {
		_, err := s.GetTo(ctx, p, io.Discard)
		if !errors.Is(err, datastore.ErrDamaged) || !strings.Contains(err.Error(), p) {
			t.Fatalf("GetTo(%s) = %v, want a damaged-file error naming it", p, err)
		}
	}
	if _, b, err := s.Get(ctx, "data/t/i/ok"); err != nil || string(b) != "hello" {
		t.Fatalf("Get of another path = %q, %v", b, err)
	}
}

// rawStore opens a Store on a fresh table and returns it with a raw client
// of the same table: the hostile peer of the foreign-writer tests.
func rawStore(t *testing.T) (*dynamodb.Client, string, *datastore.Store) {
	t.Helper()
	raw := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, raw, dynamofs.TableInput(table))
	d, err := dynamofs.Open(t.Context(), ddb.NewClient(ddblocal.Config(t), ""), dynamofs.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	return raw, table, s
}

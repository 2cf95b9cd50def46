package dynamofs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore"
)

// TestForeignFileItemClashes: a client that is not lake writes a file
// item with a raw PutItem (no feed entry, no head: only the index item).
// lake's commits still meet it: a file below it, or over it, is refused
// naming both paths (issue 27).
func TestForeignFileItemClashes(t *testing.T) {
	raw, table, s := rawStore(t)
	for _, p := range []string{"data/t/i/x", "data/u/j", "top/a/b"} {
		_, err := raw.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "f#" + datastore.Partition(p)}, "sk": &types.AttributeValueMemberS{Value: p},
			"pos": &types.AttributeValueMemberN{Value: "1"}, "t": &types.AttributeValueMemberN{Value: "0"},
			"ver": &types.AttributeValueMemberS{Value: "00"}, "size": &types.AttributeValueMemberN{Value: "0"},
			"chunks": &types.AttributeValueMemberN{Value: "0"}, "sha": &types.AttributeValueMemberS{Value: "e3b0"},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range [][2]string{
		{"data/t/i/x/y", "data/t/i/x"}, // below it, one partition
		{"data/u/j/f", "data/u/j"},     // below a model's directory
		{"top/a", "top/a/b"},           // over it
	} {
		_, err := s.Put(t.Context(), c[0], strings.NewReader("x"), nil)
		cl, ok := datastore.AsClash(err)
		if !ok || !errors.Is(err, metastore.ErrConflict) || cl.Path != c[0] || cl.Other != c[1] {
			t.Fatalf("put %s beside a foreign %s: %v", c[0], c[1], err)
		}
	}
}

// TestCatalogRowPutQueriesNothing (issue 31): a new row's put in the
// catalog scope (datastore.FlatScope, whose paths are never another's
// directory) makes no file-or-directory check: no Query of its partition
// for a row below it, where a new path of a user's namespace Queries (the
// control). The hostile peer: a raw item below a row's path in the catalog
// scope does not stop the row's put (only package catalog writes there,
// and never below a row); the same raw item in a user's namespace does.
func TestCatalogRowPutQueriesNothing(t *testing.T) {
	d := newDriver(t)
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	cat, err := s.CatalogStore()
	if err != nil {
		t.Fatal(err)
	}
	ns, err := s.Namespace("ns")
	if err != nil {
		t.Fatal(err)
	}
	queries := func(st *datastore.Store, p string) (int64, error) {
		t.Helper()
		before := d.Stats()
		_, err := st.Put(ctx, p, strings.NewReader("row"), nil)
		return d.Stats().Sub(before).Requests["Query"], err
	}
	for _, c := range []struct {
		st          *datastore.Store
		first, next string
		want        int64
	}{
		{cat, "ns/t/m1", "ns/t/m2", 0},
		{ns, "top/a", "top/b", 1},
	} {
		if _, err := queries(c.st, c.first); err != nil {
			t.Fatal(err)
		}
		if n, err := queries(c.st, c.next); err != nil || n != c.want {
			t.Fatalf("put of a new %s in %s beside %s: %d Queries, %v; want %d", c.next, c.st.NamespaceName(), c.first, n, err, c.want)
		}
	}
	raw := ddblocal.Client(t)
	foreign := func(scope, part, p string) {
		t.Helper()
		_, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(d.Table()), Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "s#" + scope + "#f#" + part}, "sk": &types.AttributeValueMemberS{Value: p},
			"pos": &types.AttributeValueMemberN{Value: "1"}, "t": &types.AttributeValueMemberN{Value: "0"},
			"ver": &types.AttributeValueMemberS{Value: "00"}, "size": &types.AttributeValueMemberN{Value: "0"},
			"chunks": &types.AttributeValueMemberN{Value: "0"}, "sha": &types.AttributeValueMemberS{Value: "e3b0"},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	foreign(datastore.CatalogScope, cat.Partition("ns/t/m3/x"), "ns/t/m3/x")
	if _, err := cat.Put(ctx, "ns/t/m3", strings.NewReader("row"), nil); err != nil {
		t.Fatalf("a row's put over a raw item below it in the catalog scope: %v; want it put", err)
	}
	foreign("ns", ns.Partition("top/c/x"), "top/c/x")
	if _, err := ns.Put(ctx, "top/c", strings.NewReader("x"), nil); !errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("a put over a raw item below it in a user's namespace: %v; want a clash", err)
	}
}

package dynamofs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
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

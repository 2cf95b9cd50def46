package dynamofs_test

import (
	"fmt"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/ddblocal"
)

func shardOf(s string) string {
	h := fnv.New32a()
	h.Write([]byte(s))
	return fmt.Sprintf("%02d", h.Sum32()%16)
}

// TestCheckReports (issue 28): items damaged by another client of the
// table (the raw SDK) are each reported by Check with their keys: a
// partition removed from the registry (repaired: registered again), a
// deleted head, a file item without a position, a deleted chunk.
func TestCheckReports(t *testing.T) {
	d := newDriver(t)
	s := datastore.New(d)
	ctx := t.Context()
	for _, p := range []string{"data/m/1/a", "data/m/2/b", "data/m/3/c"} {
		if _, err := s.Put(ctx, p, strings.NewReader(oneChunk(p)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err := s.Check(ctx, datastore.CheckOptions{Chunks: true}); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("check of a sound table: %v, %v", rep.Problems, err)
	}
	raw, table := ddblocal.Client(t), d.Table()
	k := func(pk, sk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}}
	}
	if _, err := raw.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: k("r#"+shardOf("m/1"), "r"),
		UpdateExpression:          aws.String("DELETE parts :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberSS{Value: []string{"m/1"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: k("x#"+shardOf("m/2"), "m/2")}); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: k("f#m/3", "data/m/3/junk")}); err != nil {
		t.Fatal(err)
	}
	info, err := s.Stat(ctx, "data/m/3/c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: k("c#"+info.Version, "00000000")}); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Check(ctx, datastore.CheckOptions{Chunks: true})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, p := range rep.Problems {
		lines = append(lines, p.String())
	}
	all := strings.Join(lines, "\n")
	t.Log(all)
	for _, w := range []string{"r#" + shardOf("m/1") + "/r: missing: partition m/1", "x#" + shardOf("m/2") + "/m/2: missing", "f#m/3/data/m/3/junk", "f#m/3/data/m/3/c: version"} {
		if !strings.Contains(all, w) {
			t.Errorf("check did not report %q", w)
		}
	}
	if rep, err = s.Check(ctx, datastore.CheckOptions{Repair: true}); err != nil {
		t.Fatal(err)
	}
	if parts, err := s.Partitions(ctx); err != nil || len(parts) != 3 {
		t.Errorf("partitions after the repair: %v, %v; want m/1 registered again", parts, err)
	}
}

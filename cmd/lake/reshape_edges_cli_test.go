package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore/boltstore"
)

// TestReshapeCLIDataEdges (issue 32) runs the binary on a table another
// client made and filled: plan refuses a derived attribute the items own
// (exit 2) and names items that cannot convert (exit 6); apply converts
// every other item, names the one it skipped and exits 6; a second apply
// while the state file is held says so.
func TestReshapeCLIDataEdges(t *testing.T) {
	ddblocal.Endpoint(t)
	c := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	ctx := t.Context()
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)}) })
	put := func(item map[string]types.AttributeValue) {
		if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	S := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	for i := range 6 {
		put(map[string]types.AttributeValue{"pk": S("T#1"), "sk": S(fmt.Sprintf("c%02d", i)), "author.id": S("u1")})
	}
	put(map[string]types.AttributeValue{"pk": S("T#1"), "sk": S("c06")}) // no source
	put(map[string]types.AttributeValue{"pk": S("T#1"), "sk": S("c07"), "author.id": S("u2"), "label": S("mine")})

	dir := t.TempDir()
	spec := func(name, derive string) string {
		path := filepath.Join(dir, name)
		js := fmt.Sprintf(`{"kind": "add-index", "table": %q, "index": {"name": "byAuthor", "partitionKey": {"attribute": "GSI1PK"}},
		 "covers": {"keyPrefixes": {"pk": "T#"}}, "derive": {%s}}`, table, derive)
		if err := os.WriteFile(path, []byte(js), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	lake := func(args ...string) result { return run(t, dir, "", args...) }

	owned := spec("owned.json", `"GSI1PK": "A#{author.id}", "label": "L#{sk}"`)
	if r := lake("reshape", "plan", owned); r.code != exitUsage || !strings.Contains(r.stderr, "sk=c07") || !strings.Contains(r.stdout, "foreign            1") {
		t.Fatalf("plan of a spec deriving an attribute an item owns: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	plain := spec("plain.json", `"GSI1PK": "A#{author.id}"`)
	if r := lake("reshape", "plan", plain); r.code != exitRefused || !strings.Contains(r.stderr, "sk=c06") {
		t.Fatalf("plan with an item that cannot derive: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r := lake("reshape", "apply", "--poll", "50ms", plain)
	if r.code != exitRefused || !strings.Contains(r.stdout, "failed pk=T#1 sk=c06") || !strings.Contains(r.stdout, "wrote 7,") || !strings.Contains(r.stderr, "could not be converted") {
		t.Fatalf("apply: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	// The state file held by another run: the second apply says so.
	held, err := boltstore.Open(filepath.Join(dir, "plain.state.db"), &boltstore.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if r := lake("reshape", "apply", "--poll", "50ms", plain); r.code != exitRefused || !strings.Contains(r.stderr, "another `lake reshape` apply") || strings.Contains(r.stderr, "lake serve") {
		t.Fatalf("apply while another holds the state: exit %d %s", r.code, r.stderr)
	}
}

package ddblocal_test

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"

	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore/dynamostore"
)

// createPKTable creates a PAY_PER_REQUEST table keyed by HASH pk (S).
func createPKTable(t *testing.T, c *dynamodb.Client) string {
	t.Helper()
	name := ddblocal.TableName(t)
	ddblocal.CreateTable(t, c, &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	return name
}

func key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}
}

func TestItemRoundTrip(t *testing.T) {
	c := ddblocal.Client(t)
	ctx := t.Context()
	table := createPKTable(t, c)

	// The table is ACTIVE once CreateTable returns.
	desc, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatalf("DescribeTable: %v", err)
	}
	if got := desc.Table.TableStatus; got != types.TableStatusActive {
		t.Fatalf("table status = %s, want ACTIVE", got)
	}

	// Every byte value, including NUL and invalid UTF-8.
	payload := make([]byte, 256)
	for i := range payload {
		payload[i] = byte(i)
	}
	item := key("item-1")
	item["payload"] = &types.AttributeValueMemberB{Value: payload}
	item["n"] = &types.AttributeValueMemberN{Value: "42"}
	if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatalf("PutItem: %v", err)
	}

	got, err := c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            key("item-1"),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	if got.Item == nil {
		t.Fatal("GetItem: no item")
	}
	b, ok := got.Item["payload"].(*types.AttributeValueMemberB)
	if !ok {
		t.Fatalf("payload is %T, want *types.AttributeValueMemberB", got.Item["payload"])
	}
	if !bytes.Equal(b.Value, payload) {
		t.Fatalf("payload = %x, want %x", b.Value, payload)
	}
	if n, ok := got.Item["n"].(*types.AttributeValueMemberN); !ok || n.Value != "42" {
		t.Fatalf("n = %#v, want N 42", got.Item["n"])
	}
	if pk, ok := got.Item["pk"].(*types.AttributeValueMemberS); !ok || pk.Value != "item-1" {
		t.Fatalf("pk = %#v, want S item-1", got.Item["pk"])
	}
	if len(got.Item) != 3 {
		t.Fatalf("item has %d attributes, want 3: %v", len(got.Item), got.Item)
	}

	missing, err := c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            key("no-such-item"),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("GetItem(missing): %v", err)
	}
	if missing.Item != nil {
		t.Fatalf("GetItem(missing) = %v, want no item", missing.Item)
	}
}

func TestConditionalPutFails(t *testing.T) {
	c := ddblocal.Client(t)
	ctx := t.Context()
	table := createPKTable(t, c)

	put := func(v string) error {
		item := key("k")
		item["v"] = &types.AttributeValueMemberS{Value: v}
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:           aws.String(table),
			Item:                item,
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		})
		return err
	}
	if err := put("first"); err != nil {
		t.Fatalf("first conditional PutItem: %v", err)
	}
	err := put("second")
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("second conditional PutItem: err = %v (%T), want *types.ConditionalCheckFailedException", err, err)
	}

	// The failed put changed nothing.
	got, err := c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(table), Key: key("k"), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	if v, ok := got.Item["v"].(*types.AttributeValueMemberS); !ok || v.Value != "first" {
		t.Fatalf("v = %#v, want S first", got.Item["v"])
	}
}

type captureLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *captureLogger) Logf(c logging.Classification, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("%s %s", c, fmt.Sprintf(format, v...)))
}

func (l *captureLogger) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// DynamoDB Local sends no X-Amz-Crc32 header on error responses; without
// the helper's fix the SDK logs a checksum WARN for each of them.
func TestErrorResponsesLogNoChecksumWarning(t *testing.T) {
	fromConfig := &captureLogger{}
	cfg := ddblocal.Config(t)
	cfg.Logger = fromConfig
	fromClient := &captureLogger{}
	clients := map[string]*dynamodb.Client{
		"NewFromConfig(Config)": dynamodb.NewFromConfig(cfg),
		"Client": dynamodb.New(ddblocal.Client(t).Options(), func(o *dynamodb.Options) {
			o.Logger = fromClient
		}),
	}
	logs := map[string]*captureLogger{"NewFromConfig(Config)": fromConfig, "Client": fromClient}

	for name, c := range clients {
		_, err := c.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{
			TableName: aws.String(ddblocal.TableName(t)), // never created
		})
		var nf *types.ResourceNotFoundException
		if !errors.As(err, &nf) {
			t.Fatalf("%s: DescribeTable(missing): err = %v, want *types.ResourceNotFoundException", name, err)
		}
		if lines := logs[name].all(); len(lines) != 0 {
			t.Errorf("%s: SDK logged %q, want nothing", name, lines)
		}
	}
}

var validTableName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

func TestTableName(t *testing.T) {
	seen := map[string]bool{}
	for _, sub := range []string{"plain", "with spaces/and:odd#chars", strings.Repeat("x", 100), "ünïcode"} {
		t.Run(sub, func(t *testing.T) {
			for range 3 {
				n := ddblocal.TableName(t)
				if !validTableName.MatchString(n) {
					t.Errorf("TableName = %q: not a valid DynamoDB table name", n)
				}
				if !strings.HasPrefix(n, ddblocal.TablePrefix) {
					t.Errorf("TableName = %q: want prefix %q", n, ddblocal.TablePrefix)
				}
				if seen[n] {
					t.Errorf("TableName = %q: repeated", n)
				}
				seen[n] = true
			}
		})
	}
}

// TestLakeTablesDeleted: Tables creates lake's tables under a fresh name and
// both the v1 and the v2 table (made later, as a migration would) are gone
// once the test that asked for them ends.
func TestLakeTablesDeleted(t *testing.T) {
	api := ddb.NewClient(ddblocal.Config(t), "")
	var table string
	t.Run("inner", func(t *testing.T) {
		opts := ddblocal.Tables(t, api, dynamostore.Options{})
		table = opts.Table
		if err := dynamostore.Create(t.Context(), api, dynamostore.Options{Table: table, Layout: dynamostore.LayoutV2}); err != nil {
			t.Fatal(err)
		}
	})
	for _, name := range []string{table, table + dynamostore.V2Suffix} {
		_, err := api.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		var nf *types.ResourceNotFoundException
		if !errors.As(err, &nf) {
			t.Fatalf("table %s after its test ended: %v, want ResourceNotFound", name, err)
		}
	}
}

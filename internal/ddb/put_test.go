package ddb_test

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultapi"
	"github.com/lakemeta/lake/metastore"
)

// putTable creates a fresh table keyed by "pk" and returns a Writer on it
// through a fault-injecting client, and a raw client (the hostile peer).
func putTable(t *testing.T) (ddb.Writer, *faultapi.API, *dynamodb.Client, string) {
	t.Helper()
	raw := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, raw, &dynamodb.CreateTableInput{TableName: aws.String(table), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}}})
	api := faultapi.New(ddb.NewClient(ddblocal.Config(t), ""), nil)
	w := ddb.Writer{API: api, Retryer: ddb.NewRetryer(ddb.RetryOptions{MaxAttempts: 6, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}), Meter: &ddb.Meter{}}
	return w, api, raw, table
}

func putOf(table, pk, v string, cond *expression.ConditionBuilder) ddb.Put {
	return ddb.Put{Table: table, What: pk, Condition: cond, Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: pk}, "v": &types.AttributeValueMemberS{Value: v}}}
}

func absent() *expression.ConditionBuilder {
	c := expression.AttributeNotExists(expression.Name("pk"))
	return &c
}

func valueOf(t *testing.T, raw *dynamodb.Client, table, pk string) string {
	t.Helper()
	out, err := raw.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := out.Item["v"].(*types.AttributeValueMemberS)
	if v == nil {
		return ""
	}
	return v.Value
}

// TestPutOnceReadBack (issue 29): the rules of an ambiguous conditional
// write, against DynamoDB Local with faults injected at the client.
func TestPutOnceReadBack(t *testing.T) {
	w, api, raw, table := putTable(t)
	ctx := t.Context()

	// The response of the first attempt is lost after the write applied:
	// the read-back finds the token, success, written once.
	api.SetPlan(faultapi.DropFirstResponse())
	if err := w.PutOnce(ctx, putOf(table, "a", "mine", absent())); err != nil {
		t.Fatalf("create after a lost response = %v, want nil", err)
	}
	if got := valueOf(t, raw, table, "a"); got != "mine" {
		t.Fatalf("item a = %q", got)
	}
	if n := api.Injected()[faultapi.DropResponse]; n != 1 {
		t.Fatalf("%d responses dropped, want 1", n)
	}

	// A failed condition with nothing ambiguous before it: the caller's
	// conflict.
	api.SetPlan(nil)
	err := w.PutOnce(ctx, putOf(table, "a", "again", absent()))
	if ddb.Classify(err) != ddb.ConditionFailed || errors.Is(err, metastore.ErrUnavailable) {
		t.Fatalf("create over an item = %v, want the condition failure", err)
	}

	// A 5xx (ambiguous) then a foreign writer's item: unknown, never a
	// conflict, and the foreign item stays.
	calls := 0
	api.SetPlan(func(op, _ string) faultapi.Fault {
		if op != "PutItem" {
			return faultapi.None
		}
		if calls++; calls == 1 {
			return faultapi.ServerError
		}
		if calls == 2 {
			if _, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "b"}, "v": &types.AttributeValueMemberS{Value: "foreign"}}}); err != nil {
				t.Errorf("raw PutItem: %v", err)
			}
		}
		return faultapi.None
	})
	err = w.PutOnce(ctx, putOf(table, "b", "mine", absent()))
	if !errors.Is(err, ddb.ErrUnknownOutcome) || !errors.Is(err, metastore.ErrUnavailable) {
		t.Fatalf("create after a 5xx and a foreign write = %v, want ErrUnknownOutcome", err)
	}
	if got := valueOf(t, raw, table, "b"); got != "foreign" {
		t.Fatalf("item b = %q, want the foreign writer's", got)
	}
	if tot := w.Meter.Snapshot().Total(); tot.Written != 1 || tot.Requests < 5 {
		t.Fatalf("meter %+v: want one item written over at least 5 requests", tot)
	}
}

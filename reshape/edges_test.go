package reshape

// Issue 32: reshape on tables it did not create, with the data edges a
// foreign writer leaves: attribute names holding dots and brackets, derived
// attributes the items already use, items near 400 KB, data that cannot
// derive, and an attribute named like a rewrite's marker. Each table is
// made with raw SDK calls, as boto3 would, never by lake.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore"
)

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

// foreignTable creates a table shaped by in (TableName is set here) with
// raw SDK calls, puts items, and deletes it at the end.
func foreignTable(t *testing.T, in *dynamodb.CreateTableInput, items []map[string]types.AttributeValue) (*dynamodb.Client, string) {
	t.Helper()
	c := ddblocal.Client(t)
	name := ddblocal.TableName(t)
	in.TableName = aws.String(name)
	if in.BillingMode == "" && in.ProvisionedThroughput == nil {
		in.BillingMode = types.BillingModePayPerRequest
	}
	if _, err := c.CreateTable(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	w := dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
	if err := w.Wait(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if _, err := c.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(name), Item: it}); err != nil {
			t.Fatalf("put %s: %v", KeyString(it), err)
		}
	}
	return c, name
}

func attrDefs(kv ...string) []types.AttributeDefinition {
	var out []types.AttributeDefinition
	for i := 0; i < len(kv); i += 2 {
		out = append(out, types.AttributeDefinition{AttributeName: aws.String(kv[i]), AttributeType: types.ScalarAttributeType(kv[i+1])})
	}
	return out
}

func keySchema(hash, rng string) []types.KeySchemaElement {
	ks := []types.KeySchemaElement{{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash}}
	if rng != "" {
		ks = append(ks, types.KeySchemaElement{AttributeName: aws.String(rng), KeyType: types.KeyTypeRange})
	}
	return ks
}

func parseSpec(t *testing.T, js string) *Spec {
	t.Helper()
	sp, err := Parse([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// dottedTable: key `tenant.id` (S) and `sortKey` (N); sources `author.id`
// and `c[0]`, literal names.
func dottedTable(t *testing.T, extra ...map[string]types.AttributeValue) (*dynamodb.Client, string) {
	t.Helper()
	var items []map[string]types.AttributeValue
	for i := range 12 {
		items = append(items, map[string]types.AttributeValue{
			"tenant.id": s("T#1"), "sortKey": n(fmt.Sprint(i)),
			"author.id": s(fmt.Sprintf("u%d", i%3)), "c[0]": s(fmt.Sprintf("c%02d", i)),
			"meta.v": n("1"), "tags[0]": s("x"),
		})
	}
	items = append(items, extra...)
	return foreignTable(t, &dynamodb.CreateTableInput{
		AttributeDefinitions: attrDefs("tenant.id", "S", "sortKey", "N"),
		KeySchema:            keySchema("tenant.id", "sortKey"),
	}, items)
}

const dottedSpec = `{"kind": "add-index", "table": %q,
 "index": {"name": "byAuthor", "partitionKey": {"attribute": "GSI1PK"}, "sortKey": {"attribute": "GSI1SK"}},
 "covers": {"keyPrefixes": {"tenant.id": "T#"}},
 "derive": {"GSI1PK": "AUTHOR#{author.id}", "GSI1SK": "{c[0]}"}}`

func TestNamesWithDotsAndBracketsConvert(t *testing.T) {
	c, table := dottedTable(t)
	r := newReshaper(t, c, parseSpec(t, fmt.Sprintf(dottedSpec, table)))
	rec := newRecorder(c)
	r.api = rec
	res, err := r.Apply(t.Context(), ApplyOptions{State: stateStore(t), Index: fastIndex})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Sweep.Counts["wrote"]; got != 12 {
		t.Fatalf("wrote %d of 12 items (counts %v)", got, res.Sweep.Counts)
	}
	if rec.failed != 0 {
		t.Fatalf("%d failed conditions: a dotted name was read as a path", rec.failed)
	}
	for _, it := range scanAll(t, c, table) {
		if str(it, "GSI1PK") != "AUTHOR#"+str(it, "author.id") || str(it, "GSI1SK") != str(it, "c[0]") {
			t.Fatalf("item %s not converted: %v", KeyString(keyOf2(it)), it)
		}
	}
	rep, err := r.Verify(t.Context(), VerifyOptions{IndexRetries: 10, RetryDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete {
		t.Fatalf("verify: %v", rep.Reasons)
	}
}

func keyOf2(it map[string]types.AttributeValue) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"tenant.id": it["tenant.id"], "sortKey": it["sortKey"]}
}

func TestRewriteCopiesItemsWithDottedAttributes(t *testing.T) {
	var items []map[string]types.AttributeValue
	for i := range 6 {
		items = append(items, map[string]types.AttributeValue{
			"pk": s("T#1"), "sk": s(fmt.Sprintf("c%02d", i)), "author.id": s("u1"), "meta.v": n("1"), "tags[0]": s("x"),
		})
	}
	c, table := foreignTable(t, &dynamodb.CreateTableInput{AttributeDefinitions: attrDefs("pk", "S", "sk", "S"), KeySchema: keySchema("pk", "sk")}, items)
	spec := parseSpec(t, fmt.Sprintf(`{"kind": "rewrite-key", "table": %q, "covers": {"keyPrefixes": {"pk": "T#"}},
	 "rewrite": {"key": {"pk": "AUTHOR#{author.id}", "sk": "{sk}"}}}`, table))
	rw, err := NewRewrite(t.Context(), c, spec, stateStore(t))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := rw.Apply(t.Context(), RewriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Counts[OutCopied] != 6 || sum.Counts[OutContended] != 0 {
		t.Fatalf("apply: %v, want 6 copied (the condition names every attribute, dotted ones too)", sum.Counts)
	}
	rep, err := rw.VerifyRewrite(t.Context(), VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean {
		t.Fatalf("verify not clean: %v %v", rep.Counts, rep.Problems)
	}
}

func TestDerivedAttributeMustBeTheSpecs(t *testing.T) {
	items := []map[string]types.AttributeValue{}
	for i := range 8 {
		it := map[string]types.AttributeValue{"pk": s("T#1"), "sk": s(fmt.Sprintf("c%02d", i)), "author": s("u1"), "updatedAt": n("1700000000"), "docId": s("d1")}
		if i < 3 {
			it["label"] = s("user-owned") // the items' own attribute, before any reshape
		}
		items = append(items, it)
	}
	c, table := foreignTable(t, &dynamodb.CreateTableInput{
		AttributeDefinitions: attrDefs("pk", "S", "sk", "S", "updatedAt", "N", "docId", "S"),
		KeySchema:            keySchema("pk", "sk"),
		LocalSecondaryIndexes: []types.LocalSecondaryIndex{{IndexName: aws.String("byUpdated"), KeySchema: keySchema("pk", "updatedAt"),
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{IndexName: aws.String("byDoc"), KeySchema: keySchema("docId", ""),
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}}},
	}, items)
	spec := func(derive string, extra string) *Spec {
		return parseSpec(t, fmt.Sprintf(`{"kind": "add-index", "table": %q, "index": {"name": "byAuthor", "partitionKey": {"attribute": "GSI1PK"}},
		 "covers": {"keyPrefixes": {"pk": "T#"}}, "derive": {"GSI1PK": "A#{author}", %s}%s}`, table, derive, extra))
	}
	for _, tc := range []struct{ derive, want string }{
		{`"updatedAt": "{sk}"`, "local index byUpdated"},
		{`"docId": "{sk}"`, "global index byDoc"},
	} {
		_, err := New(t.Context(), c, spec(tc.derive, ""))
		if !errors.Is(err, metastore.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("derive %s: %v, want a refusal naming %s", tc.derive, err, tc.want)
		}
	}

	// Items that already hold the derived attribute: plan refuses, apply
	// skips and names them, the user's values stay.
	r := newReshaper(t, c, spec(`"label": "L#{sk}"`, ""))
	plan, err := r.Plan(t.Context(), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Foreign != 3 || !errors.Is(plan.Err(), metastore.ErrInvalidArgument) {
		t.Fatalf("plan: foreign %d, err %v; want 3 and a refusal", plan.Foreign, plan.Err())
	}
	state := stateStore(t)
	res, err := r.Apply(t.Context(), ApplyOptions{State: state, Index: fastIndex})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sweep.Counts["failed"] != 3 || res.Sweep.Counts["wrote"] != 5 || !errors.Is(res.Err(), metastore.ErrRefused) {
		t.Fatalf("apply: %v, err %v; want 3 failed, 5 wrote, a refusal", res.Sweep.Counts, res.Err())
	}
	// A second apply (the index exists now) still does not take them: the
	// spec's ownership is not established while foreign values remain.
	if res, err = r.Apply(t.Context(), ApplyOptions{State: state, Index: fastIndex}); err != nil || res.Sweep.Counts["failed"] != 3 {
		t.Fatalf("second apply: %v, %v", res.Sweep.Counts, err)
	}
	for _, it := range scanAll(t, c, table) {
		if sk := str(it, "sk"); sk < "c03" && str(it, "label") != "user-owned" {
			t.Fatalf("item %s: label overwritten with %q", sk, str(it, "label"))
		}
	}
	// Taking it over, explicitly, converts them.
	r2 := newReshaper(t, c, spec(`"label": "L#{sk}"`, `, "takeOver": ["label"]`))
	if plan, err := r2.Plan(t.Context(), PlanOptions{}); err != nil || plan.Err() != nil {
		t.Fatalf("plan with takeOver: %v %v", err, plan.Err())
	}
	if res, err := r2.Apply(t.Context(), ApplyOptions{State: state, Index: fastIndex}); err != nil || res.Err() != nil || res.Sweep.Counts["repaired"] != 3 {
		t.Fatalf("apply with takeOver: %v, %v, %v", res.Sweep.Counts, err, res.Err())
	}
}

func TestOwnedSpecRepairsStaleButNeverRetypes(t *testing.T) {
	c, table := dottedTable(t)
	sp := parseSpec(t, fmt.Sprintf(dottedSpec, table))
	r := newReshaper(t, c, sp)
	state := stateStore(t)
	if res, err := r.Apply(t.Context(), ApplyOptions{State: state, Index: fastIndex}); err != nil || res.Err() != nil || !res.Checking {
		t.Fatalf("first apply: %v %v checking=%v", err, res.Err(), res.Checking)
	}
	// An old writer changes a source: stale, repaired (the spec owns it).
	key := map[string]types.AttributeValue{"tenant.id": s("T#1"), "sortKey": n("0")}
	upd := func(attr string, v types.AttributeValue) {
		if _, err := c.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key,
			UpdateExpression: aws.String("SET #a = :v"), ExpressionAttributeNames: map[string]string{"#a": attr},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": v}}); err != nil {
			t.Fatal(err)
		}
	}
	upd("author.id", s("u9"))
	res, err := r.Apply(t.Context(), ApplyOptions{State: state, Index: fastIndex})
	if err != nil || res.Checking || res.Sweep.Counts["repaired"] != 1 {
		t.Fatalf("second apply: %v %v checking=%v", res.Sweep.Counts, err, res.Checking)
	}
}

func TestItemsThatCannotConvertAreNamedAndSkipped(t *testing.T) {
	big := map[string]types.AttributeValue{"tenant.id": s("T#1"), "sortKey": n("100"), "author.id": s("u1"), "c[0]": s("c-big")}
	big["body"] = s(strings.Repeat("b", maxItemBytes-itemSize(big)-len("body")-4)) // fits; the derived attributes do not
	noSource := map[string]types.AttributeValue{"tenant.id": s("T#1"), "sortKey": n("101"), "c[0]": s("c-nosrc")}
	empty := map[string]types.AttributeValue{"tenant.id": s("T#1"), "sortKey": n("102"), "author.id": s("u1"), "c[0]": s("")}
	c, table := dottedTable(t, big, noSource, empty)
	r := newReshaper(t, c, parseSpec(t, fmt.Sprintf(dottedSpec, table)))

	plan, err := r.Plan(t.Context(), PlanOptions{Examples: 10})
	if err != nil {
		t.Fatal(err)
	}
	if plan.NotDerivable != 3 || !errors.Is(plan.Err(), metastore.ErrRefused) {
		t.Fatalf("plan: %d cannot convert (%v), err %v; want 3 and a refusal", plan.NotDerivable, plan.Examples, plan.Err())
	}
	if !strings.Contains(fmt.Sprint(plan.Examples), "400 KB") {
		t.Fatalf("plan does not predict the item too large: %v", plan.Examples)
	}
	res, err := r.Apply(t.Context(), ApplyOptions{State: stateStore(t), Index: fastIndex, PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sweep.Counts["wrote"] != 12 || res.Sweep.Counts["failed"] != 3 {
		t.Fatalf("apply: %v; want the 12 others written and 3 failed", res.Sweep.Counts)
	}
	err = res.Err()
	for _, k := range []string{"sortKey=100", "sortKey=101", "sortKey=102"} {
		if !strings.Contains(fmt.Sprint(res.Failed), k) || !strings.Contains(fmt.Sprint(err), "could not be converted") {
			t.Fatalf("apply does not name %s: %v / %v", k, res.Failed, err)
		}
	}
	if !errors.Is(err, metastore.ErrRefused) {
		t.Fatalf("apply err %v, want ErrRefused", err)
	}
}

func TestItemRefusedByDynamoDBDoesNotStopTheSweep(t *testing.T) {
	// The estimate says it fits, DynamoDB says no: the write's own refusal
	// is the item's, and the sweep goes on.
	c, table := dottedTable(t)
	r := newReshaper(t, c, parseSpec(t, fmt.Sprintf(dottedSpec, table)))
	r.api = refuseOne{API: c, sortKey: "5"}
	res, err := r.Apply(t.Context(), ApplyOptions{State: stateStore(t), Index: fastIndex, PageSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sweep.Counts["wrote"] != 11 || res.Sweep.Counts["failed"] != 1 || !strings.Contains(fmt.Sprint(res.Failed), "Item size has exceeded") {
		t.Fatalf("apply: %v %v", res.Sweep.Counts, res.Failed)
	}
}

// refuseOne answers one item's UpdateItem as DynamoDB does an item pushed
// past 400 KB.
type refuseOne struct {
	API
	sortKey string
}

func (a refuseOne) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if scalarText(in.Key["sortKey"]) == a.sortKey {
		return nil, &smithy.GenericAPIError{Code: "ValidationException", Message: "Item size has exceeded the maximum allowed size"}
	}
	return a.API.UpdateItem(ctx, in, o...)
}

func TestRewriteMarkerClash(t *testing.T) {
	items := []map[string]types.AttributeValue{
		{"pk": s("T#1"), "sk": s("c00"), "author": s("u1")},
		{"pk": s("T#1"), "sk": s("c01"), "author": s("u1"), "lakeRewrittenFrom": s("the user's own")},
		// Not covered, shaped like a copy whose old item is gone: a user's
		// item that an orphan sweep must never delete.
		{"pk": s("OTHER"), "sk": s("x"), "author": s("u2"), "lakeRewrittenFrom": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"pk": s("T#9"), "sk": s("gone")}}},
	}
	c, table := foreignTable(t, &dynamodb.CreateTableInput{AttributeDefinitions: attrDefs("pk", "S", "sk", "S"), KeySchema: keySchema("pk", "sk")}, items)
	spec := parseSpec(t, fmt.Sprintf(`{"kind": "rewrite-key", "table": %q, "covers": {"keyPrefixes": {"pk": "T#"}},
	 "rewrite": {"key": {"pk": "AUTHOR#{author}", "sk": "{sk}"}}}`, table))
	rw, err := NewRewrite(t.Context(), c, spec, stateStore(t))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := rw.PlanRewrite(t.Context(), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Clashes != 1 || !errors.Is(plan.Err(), metastore.ErrInvalidArgument) {
		t.Fatalf("plan: %d clashes, err %v", plan.Clashes, plan.Err())
	}
	sum, err := rw.Apply(t.Context(), RewriteOptions{})
	if !errors.Is(err, metastore.ErrRefused) || sum.Counts[OutMarkerClash] != 1 || sum.Counts[OutCopied] != 1 || !strings.Contains(fmt.Sprint(err), "sk=c01") {
		t.Fatalf("apply: %v, %v", sum.Counts, err)
	}
	rep, err := rw.VerifyRewrite(t.Context(), VerifyOptions{})
	if err != nil || rep.Clean {
		t.Fatalf("verify: clean=%v %v, want not clean", rep.Clean, err)
	}
	got := map[string]bool{}
	for _, it := range scanAll(t, c, table) {
		got[str(it, "pk")+"/"+str(it, "sk")] = true
	}
	if !got["OTHER/x"] || !got["T#1/c01"] {
		t.Fatalf("a user's item was deleted or moved: %v", got)
	}
}

func TestSpecChecksAgainstTheTable(t *testing.T) {
	c, table := dottedTable(t)
	_, err := New(t.Context(), c, parseSpec(t, fmt.Sprintf(`{"kind": "add-index", "table": %q,
	 "index": {"name": "byAuthor", "partitionKey": {"attribute": "GSI1PK"}},
	 "covers": {"keyPrefixes": {"sortKey": "1"}}, "derive": {"GSI1PK": "A#{author.id}"}}`, table)))
	if !errors.Is(err, metastore.ErrInvalidArgument) || !strings.Contains(err.Error(), "type N") {
		t.Fatalf("keyPrefixes on an N key: %v", err)
	}
	_, err = New(t.Context(), c, parseSpec(t, fmt.Sprintf(`{"kind": "add-index", "table": %q,
	 "index": {"name": "byAuthor", "partitionKey": {"attribute": "GSI1PK"}, "provisioned": {"read": 5, "write": 5}},
	 "derive": {"GSI1PK": "A#{author.id}"}}`, table)))
	if !errors.Is(err, metastore.ErrInvalidArgument) || !strings.Contains(err.Error(), "on-demand") {
		t.Fatalf("provisioned on an on-demand table: %v", err)
	}
}

// The plan's estimate counts the writes of every existing index that
// projects the item, as DynamoDB bills them: a table with an LSI and a GSI
// projecting ALL pays for three index writes per converted item, not one.
func TestPlanEstimateCountsProjectingIndexes(t *testing.T) {
	var items []map[string]types.AttributeValue
	for i := range 20 {
		items = append(items, map[string]types.AttributeValue{"pk": s("T#1"), "sk": s(fmt.Sprintf("c%02d", i)), "author": s("u1"),
			"updatedAt": n(fmt.Sprint(1700000000 + i)), "docId": s("d1"), "body": s(strings.Repeat("x", 1500))})
	}
	all := &types.Projection{ProjectionType: types.ProjectionTypeAll}
	c, table := foreignTable(t, &dynamodb.CreateTableInput{
		AttributeDefinitions:   attrDefs("pk", "S", "sk", "S", "updatedAt", "N", "docId", "S"),
		KeySchema:              keySchema("pk", "sk"),
		LocalSecondaryIndexes:  []types.LocalSecondaryIndex{{IndexName: aws.String("byUpdated"), KeySchema: keySchema("pk", "updatedAt"), Projection: all}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{IndexName: aws.String("byDoc"), KeySchema: keySchema("docId", ""), Projection: all}},
	}, items)
	r := newReshaper(t, c, parseSpec(t, fmt.Sprintf(`{"kind": "add-index", "table": %q, "index": {"name": "byAuthor", "partitionKey": {"attribute": "GSI1PK"}},
	 "derive": {"GSI1PK": "A#{author}"}}`, table)))
	plan, err := r.Plan(t.Context(), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// 2 KB items: 2 units for the table, 2 for the new index, 2 each for
	// the LSI and the GSI that project everything.
	if want := 20 * 8.0; plan.EstimatedWCU != want {
		t.Fatalf("plan estimates %.0f WCU, want %.0f", plan.EstimatedWCU, want)
	}
}

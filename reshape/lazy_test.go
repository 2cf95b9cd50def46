package reshape

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
)

func keyOf(it map[string]types.AttributeValue) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"PK": it["PK"], "SK": it["SK"]}
}

func oldComments(t *testing.T, api API, table string) []map[string]types.AttributeValue {
	t.Helper()
	var out []map[string]types.AttributeValue
	for _, it := range scanAll(t, api, table) {
		if isComment(it) {
			out = append(out, it)
		}
	}
	return out
}

// TestLazyRead covers the read helper: it converts what it meets, re-decides
// on a concurrent change, and never re-creates a deleted item.
func TestLazyRead(t *testing.T) {
	client, spec, _ := demoTable(t, DemoOptions{Workspaces: 1})
	r := newReshaper(t, client, spec)
	if _, err := r.EnsureIndex(t.Context(), fastIndex); err != nil {
		t.Fatal(err)
	}
	old := oldComments(t, client, spec.Table)

	got, err := r.Get(t.Context(), keyOf(old[0]))
	if err != nil || str(got, "GSI1PK") != "MEMBER#"+str(old[0], "memberId") {
		t.Fatalf("Get: %v %v", got, err)
	}
	if st := spec.Classify(scanItem(t, client, spec.Table, old[0])).State; st != Converted {
		t.Fatalf("stored item is %v after Get", st)
	}

	// A source changed between the read and the conversion: the condition
	// fails, the item is re-read and converted from its current value.
	put(t, client, spec.Table, with(old[1], "memberId", "u777"))
	res, err := r.Convert(t.Context(), old[1])
	if err != nil || res.Outcome != Wrote || res.Retries != 1 || str(res.Item, "GSI1PK") != "MEMBER#u777" {
		t.Fatalf("convert after a concurrent change: %+v %v", res, err)
	}

	// Deleted between the read and the conversion: nothing is written.
	if _, err := client.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: aws.String(spec.Table), Key: keyOf(old[2])}); err != nil {
		t.Fatal(err)
	}
	res, err = r.Convert(t.Context(), old[2])
	if err != nil || res.Outcome != Gone || res.Item != nil {
		t.Fatalf("convert of a deleted item: %+v %v", res, err)
	}
	if it := scanItem(t, client, spec.Table, old[2]); it != nil {
		t.Fatalf("deleted item re-created: %v", it)
	}
	if _, err := r.Get(t.Context(), keyOf(old[2])); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("Get of a deleted item: %v", err)
	}
}

func TestWithDerived(t *testing.T) {
	client, spec, _ := demoTable(t, DemoOptions{Workspaces: 1, DocsPerWS: 1, CommentsPerDoc: 1})
	r := newReshaper(t, client, spec)
	c := DemoComment("a91", DemoDocPrefix, "c9", "u44", mustTime("2026-04-01T10:00:00Z"))
	got, err := r.WithDerived(c)
	if err != nil || str(got, "GSI1PK") != "MEMBER#u44" || str(got, "GSI1SK") != "CMT#2026-04-01T10:00:00Z#c9" || c["GSI1PK"] != nil {
		t.Fatalf("WithDerived: %v %v (input changed: %v)", got, err, c["GSI1PK"] != nil)
	}
	doc := av("PK", "WS#a91", "SK", "DOC#2026-04-09#z1", "title", "t")
	if got, err := r.WithDerived(doc); err != nil || len(got) != len(doc) {
		t.Fatalf("WithDerived of a document: %v %v", got, err)
	}
	delete(c, "memberId")
	if _, err := r.WithDerived(c); !errors.Is(err, metastore.ErrInvalidArgument) || !strings.Contains(err.Error(), "memberId is missing") {
		t.Fatalf("WithDerived of an underivable comment: %v", err)
	}
}

// TestVerifyObsolescenceCutoff: a lazy-only backfill converted the recent
// comments; older ones are obsolete by design past the cutoff.
func TestVerifyObsolescenceCutoff(t *testing.T) {
	client, spec, _ := demoTable(t, DemoOptions{Workspaces: 1})
	r := newReshaper(t, client, spec)
	if _, err := r.EnsureIndex(t.Context(), fastIndex); err != nil {
		t.Fatal(err)
	}
	cutoff := mustTime("2026-04-03T00:00:00Z")
	older := 0
	for _, it := range oldComments(t, client, spec.Table) {
		if ts, _ := ParseTimestamp(it["createdAt"]); ts.Before(cutoff) {
			older++
			continue
		}
		if _, err := r.Convert(t.Context(), it); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := r.Verify(t.Context(), VerifyOptions{})
	if err != nil || rep.Complete || rep.Total.Missing != int64(older) {
		t.Fatalf("without cutoff: %v complete=%v %+v", err, rep.Complete, rep.Total)
	}
	rep, err = r.Verify(t.Context(), VerifyOptions{ObsoleteBefore: cutoff})
	if err != nil || !rep.Complete || rep.Total.Obsolete != int64(older) || rep.Total.Missing != 0 || len(rep.Obsolete) != older {
		t.Fatalf("with cutoff: %v complete=%v %+v", err, rep.Complete, rep.Total)
	}
}

func TestPlan(t *testing.T) {
	client, spec, demo := demoTable(t, DemoOptions{})
	odd := DemoComment("a91", DemoDocPrefix, "imported", "x", time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	delete(odd, "memberId")
	put(t, client, spec.Table, odd)
	r := newReshaper(t, client, spec)
	p, err := r.Plan(t.Context(), PlanOptions{Segments: 2, PageSize: 9})
	if err != nil {
		t.Fatal(err)
	}
	if p.IndexStatus != "" || p.Covered != int64(demo.Comments+1) || p.Missing != int64(demo.Comments) || p.Converted != 0 || p.NotDerivable != 1 || p.Scanned != int64(demo.Items+1) {
		t.Fatalf("plan: %+v (demo %d items, %d comments)", p, demo.Items, demo.Comments)
	}
	if len(p.Examples) != 1 || !strings.Contains(p.Examples[0].Reason, "memberId is missing") || !strings.Contains(p.Examples[0].Key, "imported") {
		t.Fatalf("examples: %+v", p.Examples)
	}
	if p.DistinctKeys != DefaultDemoWorkspaces*DefaultDemoMembers || len(p.Hottest) != DefaultTop || p.Warning != "" {
		t.Fatalf("distribution: %d keys, hottest %+v, warning %q", p.DistinctKeys, p.Hottest, p.Warning)
	}
	for i, k := range p.Hottest {
		if i > 0 && k.Items > p.Hottest[i-1].Items {
			t.Fatalf("hottest not sorted: %+v", p.Hottest)
		}
	}
	if p.EstimatedWCU < float64(2*demo.Comments) {
		t.Fatalf("estimated %v WCU for %d items and their index writes", p.EstimatedWCU, demo.Comments)
	}
	p, err = r.Plan(t.Context(), PlanOptions{HotShare: 0.01})
	if err != nil || !strings.Contains(p.Warning, p.Hottest[0].Value) {
		t.Fatalf("no warning over a 1%% share: %q %v", p.Warning, err)
	}
	if _, err := r.Apply(t.Context(), ApplyOptions{Index: fastIndex}); err != nil {
		t.Fatal(err)
	}
	p, err = newReshaper(t, client, spec).Plan(t.Context(), PlanOptions{})
	if err != nil || p.Converted != int64(demo.Comments) || p.Missing+p.Stale != 0 || p.IndexStatus != "ACTIVE" {
		t.Fatalf("plan after apply: %+v %v", p, err)
	}
}

func with(m map[string]types.AttributeValue, kv ...string) map[string]types.AttributeValue {
	out := map[string]types.AttributeValue{}
	for k, v := range m {
		out[k] = v
	}
	for k, v := range av(kv...) {
		out[k] = v
	}
	return out
}

func put(t *testing.T, api API, table string, item map[string]types.AttributeValue) {
	t.Helper()
	if _, err := api.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

func scanItem(t *testing.T, api API, table string, it map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	out, err := api.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: keyOf(it), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Item) == 0 {
		return nil
	}
	return out.Item
}

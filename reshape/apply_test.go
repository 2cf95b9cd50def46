package reshape

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
)

// liveWriters runs, until stop is closed, writers of the three kinds the
// issue names: new comments written through the dual-write helper, and old
// comments edited and deleted by a raw SDK client that knows nothing of the
// reshape. It records what it did.
type liveWriters struct {
	created sync.Map // KeyString → item written
	edited  sync.Map // KeyString → last body written
	deleted sync.Map // KeyString → true
	n       atomic.Int64
}

func (w *liveWriters) run(t *testing.T, ctx context.Context, api *dynamodb.Client, r *Reshaper, table string, old []map[string]types.AttributeValue, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	// Old comments are split between a deleter, an editor and an
	// application updating them through the dual-write helper, so that
	// each key has one writer besides apply and its last write is known.
	var toEdit, toDelete, toUpdate []map[string]types.AttributeValue
	for i, it := range old {
		switch i % 4 {
		case 0:
			toDelete = append(toDelete, it)
		case 1:
			toUpdate = append(toUpdate, it)
		default:
			toEdit = append(toEdit, it)
		}
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	wg.Add(4)
	go func() { // the application moves old comments to another member, writing both shapes
		defer wg.Done()
		rng := rand.New(rand.NewPCG(3, 4))
		for i := 0; !stopped(); i++ {
			it := toUpdate[rng.IntN(len(toUpdate))]
			key := map[string]types.AttributeValue{"PK": it["PK"], "SK": it["SK"]}
			var cur map[string]types.AttributeValue
			err := retry5xx(ctx, func() error {
				out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
				if err == nil {
					cur = out.Item
				}
				return err
			})
			if err != nil {
				t.Error(err)
				return
			}
			next := maps.Clone(cur)
			next["memberId"] = &types.AttributeValueMemberS{Value: fmt.Sprintf("u10%d", i%8)}
			full, err := r.WithDerived(next)
			if err != nil {
				t.Error(err)
				return
			}
			// The application's own optimistic check: the item it read.
			cond, _ := expression.NewBuilder().WithCondition(expression.Name("memberId").Equal(expression.Value(cur["memberId"]))).Build()
			err = retry5xx(ctx, func() error {
				_, err := api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: full,
					ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(), ExpressionAttributeValues: cond.Values()})
				return err
			})
			if err != nil {
				t.Error(err)
				return
			}
			w.n.Add(1)
		}
	}()
	go func() { // dual-writer: new comments with their derived attributes
		defer wg.Done()
		for i := 0; !stopped(); i++ {
			item := DemoComment("a91", DemoDocPrefix, fmt.Sprintf("new%04d", i), fmt.Sprintf("u1%02d", i%4), time.Date(2026, 5, 1, 0, 0, i, 0, time.UTC))
			full, err := r.WithDerived(item)
			if err != nil {
				t.Error(err)
				return
			}
			cond, _ := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name("PK"))).Build()
			err = retry5xx(ctx, func() error {
				_, err := api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: full,
					ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names()})
				return err
			})
			if err != nil {
				t.Error(err)
				return
			}
			w.created.Store(KeyString(r.tab().key(full)), full)
			w.n.Add(1)
		}
	}()
	go func() { // old writer: edits the body of old comments, never creating one
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; !stopped(); i++ {
			it := toEdit[rng.IntN(len(toEdit))]
			key := map[string]types.AttributeValue{"PK": it["PK"], "SK": it["SK"]}
			body := fmt.Sprintf("edit %d", i)
			expr, _ := expression.NewBuilder().
				WithCondition(expression.AttributeExists(expression.Name("PK"))).
				WithUpdate(expression.Set(expression.Name("body"), expression.Value(body))).Build()
			err := retry5xx(ctx, func() error {
				_, err := api.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key,
					ConditionExpression: expr.Condition(), UpdateExpression: expr.Update(),
					ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()})
				return err
			})
			if err != nil {
				t.Error(err)
				return
			}
			w.edited.Store(KeyString(key), body)
			w.n.Add(1)
		}
	}()
	go func() { // old writer: deletes old comments
		defer wg.Done()
		for _, it := range toDelete {
			if stopped() {
				return
			}
			key := map[string]types.AttributeValue{"PK": it["PK"], "SK": it["SK"]}
			if err := retry5xx(ctx, func() error {
				_, err := api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key})
				return err
			}); err != nil {
				t.Error(err)
				return
			}
			w.deleted.Store(KeyString(key), true)
			w.n.Add(1)
			time.Sleep(3 * time.Millisecond)
		}
	}()
	return &wg
}

// retry5xx retries f while it fails with a server error, as an application
// does. DynamoDB Local fails writes with a 500 while an UpdateTable adds an
// index (its SQLite schema changes under them; DynamoDB itself keeps
// serving). In DynamoDB Local a 500 means nothing was applied, so the
// writers' records stay exact.
func retry5xx(ctx context.Context, f func() error) error {
	// Time, not attempts, bounds it: on a loaded machine DynamoDB Local's
	// schema change can last seconds.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		var re *awshttp.ResponseError
		if err == nil || time.Now().After(deadline) || !errors.As(err, &re) || re.HTTPStatusCode() < 500 {
			return err
		}
		if err := ddb.Sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
}

// TestApplyWithLiveWriters is the first "done when": on the demo
// table, with writers running throughout, apply then verify reports full
// coverage; the index query for each member returns exactly that member's
// comments, newest first; no item was re-created and no concurrent write
// overwritten.
func TestApplyWithLiveWriters(t *testing.T) {
	client, spec, _ := demoTable(t, DemoOptions{CommentsPerDoc: 25})
	rec := newRecorder(client)
	r := newReshaper(t, rec, spec)
	writerR := newReshaper(t, client, spec)
	var old []map[string]types.AttributeValue
	for _, it := range scanAll(t, client, spec.Table) {
		if isComment(it) {
			old = append(old, it)
		}
	}
	stop := make(chan struct{})
	var w liveWriters
	wg := w.run(t, t.Context(), client, writerR, spec.Table, old, stop)
	time.Sleep(50 * time.Millisecond)

	res, err := r.Apply(t.Context(), ApplyOptions{Segments: 4, PageSize: 10, State: stateStore(t), Index: fastIndex})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IndexCreated || !res.Sweep.Complete {
		t.Fatalf("apply: %+v", res)
	}
	// The index is eventually consistent: on a loaded CI machine DynamoDB
	// Local's took longer than the default retries (6 s) to settle, so the
	// check waits up to 25 s; an index entry that is really wrong stays
	// wrong however long it waits.
	rep, err := r.Verify(t.Context(), VerifyOptions{Segments: 3, PageSize: 25, Sample: 50, IndexRetries: 7})
	if err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if !rep.Complete || rep.Err() != nil {
		t.Fatalf("verify with writers running: %v, totals %+v, index %+v", rep.Err(), rep.Total, rep.IndexCheck)
	}
	// With writers moving items between members throughout, a sampled key
	// may stay unsettled (its items changed between every two reads): it is
	// reported as such, never as a match or a mismatch.
	if ic := rep.IndexCheck; ic.Checked == 0 || len(ic.Mismatches) > 0 || ic.Matched+ic.Unsettled != ic.Checked || ic.Matched == 0 {
		t.Fatalf("index check: %+v", rep.IndexCheck)
	}
	t.Logf("apply %v; %d live writes; verify %+v, index check %+v", res.Sweep.Counts, w.n.Load(), rep.Total, rep.IndexCheck)
	if res.Sweep.Counts["wrote"] == 0 || res.Sweep.Counts["gone"]+res.Sweep.Counts["wrote"] == 0 {
		t.Fatalf("apply converted nothing: %v", res.Sweep.Counts)
	}

	final := scanAll(t, client, spec.Table)
	byKey := map[string]map[string]types.AttributeValue{}
	for _, it := range final {
		byKey[KeyString(r.tab().key(it))] = it
	}
	// No deleted item came back.
	w.deleted.Range(func(k, _ any) bool {
		if _, ok := byKey[k.(string)]; ok {
			t.Errorf("deleted item %s was re-created", k)
		}
		return true
	})
	// No concurrent write was overwritten.
	w.edited.Range(func(k, v any) bool {
		if it, ok := byKey[k.(string)]; ok && str(it, "body") != v.(string) {
			t.Errorf("item %s: body %q, last edit %q", k, str(it, "body"), v)
		}
		return true
	})
	// Each item converted at most once against its condition.
	for k, n := range rec.counts() {
		if n != 1 {
			t.Errorf("item %s written %d times", k, n)
		}
	}
	checkMemberQueries(t, client, spec, final)
}

// checkMemberQueries queries the index for every member and compares with
// the member's comments in the table, newest first.
func checkMemberQueries(t *testing.T, api API, spec *Spec, items []map[string]types.AttributeValue) {
	t.Helper()
	want := map[string][]map[string]types.AttributeValue{}
	for _, it := range items {
		if isComment(it) {
			want[str(it, "memberId")] = append(want[str(it, "memberId")], it)
		}
	}
	for member, comments := range want {
		sort.Slice(comments, func(i, j int) bool {
			return str(comments[i], "GSI1SK") > str(comments[j], "GSI1SK")
		})
		got := memberComments(t, api, spec, member)
		if len(got) != len(comments) {
			t.Errorf("member %s: index returns %d comments, table holds %d", member, len(got), len(comments))
			continue
		}
		for i := range got {
			if str(got[i], "SK") != str(comments[i], "SK") || str(got[i], "memberId") != member {
				t.Errorf("member %s: comment %d is %s, want %s", member, i, str(got[i], "SK"), str(comments[i], "SK"))
				break
			}
			if i > 0 && str(got[i], "createdAt") > str(got[i-1], "createdAt") {
				t.Errorf("member %s: not newest first at %d", member, i)
			}
		}
	}
}

// memberComments is the seed's new query: GSI1PK = MEMBER#<id>, newest first.
func memberComments(t *testing.T, api API, spec *Spec, member string) []map[string]types.AttributeValue {
	t.Helper()
	expr, err := expression.NewBuilder().WithKeyCondition(expression.Key("GSI1PK").Equal(expression.Value("MEMBER#" + member))).Build()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]types.AttributeValue
	var start map[string]types.AttributeValue
	for {
		page, err := api.Query(t.Context(), &dynamodb.QueryInput{
			TableName: aws.String(spec.Table), IndexName: aws.String(spec.Index.Name),
			KeyConditionExpression: expr.KeyCondition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
			ScanIndexForward: aws.Bool(false), ExclusiveStartKey: start,
		})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Items...)
		if len(page.LastEvaluatedKey) == 0 {
			return out
		}
		start = page.LastEvaluatedKey
	}
}

// TestApplyKilledAndRerunConverges cancels apply at random pages and at
// random writes, reruns it until it completes, and checks that every comment
// was converted exactly once.
func TestApplyKilledAndRerunConverges(t *testing.T) {
	client, spec, demo := demoTable(t, DemoOptions{CommentsPerDoc: 15})
	rec := newRecorder(client)
	r := newReshaper(t, rec, spec)
	state := stateStore(t)
	rng := rand.New(rand.NewPCG(7, 7))
	kills := 0
	for run := 0; ; run++ {
		if run > 200 {
			t.Fatal("apply did not converge in 200 runs")
		}
		ctx, cancel := context.WithCancel(t.Context())
		var scans, upds atomic.Int64
		killScan, killUpd := int64(1+rng.IntN(12)), int64(1+rng.IntN(40))
		rec.mu.Lock()
		rec.beforeScan = func() {
			if scans.Add(1) == killScan {
				cancel()
			}
		}
		rec.beforeUpd = func() {
			if upds.Add(1) == killUpd {
				cancel()
			}
		}
		rec.mu.Unlock()
		res, err := r.Apply(ctx, ApplyOptions{Segments: 3, PageSize: 7, State: state, Index: fastIndex})
		cancel()
		if err == nil {
			if !res.Sweep.Complete {
				t.Fatalf("apply returned without error but incomplete: %+v", res.Sweep)
			}
			break
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("run %d: %v", run, err)
		}
		kills++
	}
	rec.mu.Lock()
	rec.beforeScan, rec.beforeUpd = nil, nil
	rec.mu.Unlock()
	if kills < 3 {
		t.Fatalf("only %d kills: the test did not exercise resumption", kills)
	}
	counts := rec.counts()
	if len(counts) != demo.Comments {
		t.Errorf("%d items written, %d comments", len(counts), demo.Comments)
	}
	for k, n := range counts {
		if n != 1 {
			t.Errorf("item %s written %d times against its condition", k, n)
		}
	}
	rep, err := r.Verify(t.Context(), VerifyOptions{})
	if err != nil || !rep.Complete {
		t.Fatalf("verify after %d kills: %v %+v", kills, err, rep.Total)
	}
	t.Logf("converged after %d kills; %d conditional failures", kills, rec.failed)
}

// TestStaleRepaired: an old writer changes a source attribute of converted
// items; verify reports them stale and incomplete; apply repairs them,
// conditioned on the current values; verify is then complete.
func TestStaleRepaired(t *testing.T) {
	client, spec, _ := demoTable(t, DemoOptions{Workspaces: 1})
	r := newReshaper(t, client, spec)
	if _, err := r.Apply(t.Context(), ApplyOptions{Index: fastIndex}); err != nil {
		t.Fatal(err)
	}
	var edited []map[string]types.AttributeValue
	for _, it := range scanAll(t, client, spec.Table) {
		if isComment(it) && len(edited) < 5 {
			edited = append(edited, it)
		}
	}
	for _, it := range edited {
		expr, _ := expression.NewBuilder().WithUpdate(expression.Set(expression.Name("memberId"), expression.Value("u999"))).Build()
		if _, err := client.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{TableName: aws.String(spec.Table),
			Key: map[string]types.AttributeValue{"PK": it["PK"], "SK": it["SK"]}, UpdateExpression: expr.Update(),
			ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := r.Verify(t.Context(), VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Complete || rep.Total.Stale != 5 || len(rep.Stale) != 5 || !errors.Is(rep.Err(), metastore.ErrRefused) {
		t.Fatalf("verify after old writes: complete=%v stale=%d listed=%d err=%v", rep.Complete, rep.Total.Stale, len(rep.Stale), rep.Err())
	}
	res, err := r.Apply(t.Context(), ApplyOptions{Index: fastIndex})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sweep.Counts["repaired"] != 5 {
		t.Fatalf("apply repaired %d, want 5: %v", res.Sweep.Counts["repaired"], res.Sweep.Counts)
	}
	rep, err = r.Verify(t.Context(), VerifyOptions{})
	if err != nil || !rep.Complete {
		t.Fatalf("verify after repair: %v %v", err, rep.Err())
	}
	if got := memberComments(t, client, spec, "u999"); len(got) != 5 {
		t.Fatalf("index holds %d comments of u999, want 5", len(got))
	}
}

package reshape

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/sweep"
)

// rewriteDemo creates the demo table and opens the example key rewrite on
// it, with a fresh state store and short refresh and settle times.
func rewriteDemo(t *testing.T, opts DemoOptions, api func(RewriteAPI) RewriteAPI) (*dynamodb.Client, *Rewrite) {
	t.Helper()
	c, s, _ := demoTable(t, opts)
	spec, err := DemoRewriteSpec(s.Table)
	if err != nil {
		t.Fatal(err)
	}
	var a RewriteAPI = c
	if api != nil {
		a = api(c)
	}
	rw, err := NewRewrite(t.Context(), a, spec, stateStore(t))
	if err != nil {
		t.Fatal(err)
	}
	rw.RefreshInterval = 20 * time.Millisecond
	return c, rw
}

func demoComments(opts DemoOptions) []map[string]types.AttributeValue {
	var out []map[string]types.AttributeValue
	for _, it := range DemoItems(opts) {
		if isComment(it) {
			out = append(out, it)
		}
	}
	return out
}

// commentModel is what the writers of a test did to the comments: the
// latest body of each, or deleted.
type commentModel struct {
	mu    sync.Mutex
	items map[string]*modelItem // old key → item
}

type modelItem struct {
	ref     map[string]types.AttributeValue
	body    string
	deleted bool
}

func (m *commentModel) set(ref map[string]types.AttributeValue, body string, deleted bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.items[KeyString(map[string]types.AttributeValue{"PK": ref["PK"], "SK": ref["SK"]})] = &modelItem{ref: ref, body: body, deleted: deleted}
}

// TestRewriteLiveWritersKillsConverge is issue 15's "done when": the demo
// table is rewritten to the member-partitioned key while dual-writers put,
// edit and delete comments through the helpers, a raw SDK client edits and
// deletes old items, and a reader reads through the dual-read helper
// throughout; apply and finalize are killed at random pages and rerun.
// Verify is clean after apply repaired the raw writer's work, finalize
// leaves every comment once under its new key with its latest body, no
// deleted comment comes back, and the reader never misses one.
func TestRewriteLiveWritersKillsConverge(t *testing.T) {
	opts := DemoOptions{Workspaces: 2, MembersPerWS: 4, DocsPerWS: 3, CommentsPerDoc: 10}
	c, rw := rewriteDemo(t, opts, nil)
	ctx := t.Context()
	comments := demoComments(opts)
	model := &commentModel{items: map[string]*modelItem{}}
	var stable, dual, raw []map[string]types.AttributeValue
	for i, cm := range comments {
		model.set(cm, str(cm, "body"), false)
		switch i % 4 {
		case 1:
			dual = append(dual, cm)
		case 2:
			raw = append(raw, cm)
		default:
			stable = append(stable, cm)
		}
	}

	var (
		stopWriters = make(chan struct{})
		stopRaw     = make(chan struct{})
		wg          sync.WaitGroup
		reads       atomic.Int64
		dualDeleted sync.Map // old key → ref, deleted through the helper
	)
	// Dual-writers: each owns half of the dual items and creates its own.
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			var mine []map[string]types.AttributeValue
			for i, cm := range dual {
				if i%2 == w {
					mine = append(mine, cm)
				}
			}
			for n := 0; ; n++ {
				select {
				case <-stopWriters:
					return
				default:
				}
				switch op := rng.IntN(10); {
				case op < 2 || len(mine) == 0:
					cm := DemoComment(DemoWorkspace, DemoDocPrefix, fmt.Sprintf("new%d-%d", w, n), DemoMember, time.Date(2026, 5, 1, 0, 0, n, 0, time.UTC))
					if err := rw.Put(ctx, cm); err != nil {
						t.Errorf("dual-write create: %v", err)
						return
					}
					model.set(cm, str(cm, "body"), false)
					mine = append(mine, cm)
				case op < 8:
					i := rng.IntN(len(mine))
					cm := mine[i]
					body := fmt.Sprintf("edited by dual-writer %d, %d", w, n)
					next := map[string]types.AttributeValue{}
					for k, v := range cm {
						next[k] = v
					}
					next["body"] = &types.AttributeValueMemberS{Value: body}
					if op == 7 {
						// Hand the comment to another member: its new
						// key moves, and the former copy must go.
						next["memberId"] = &types.AttributeValueMemberS{Value: fmt.Sprintf("u9%d%d", w, n)}
					}
					if err := rw.Replace(ctx, cm, next); err != nil {
						t.Errorf("dual-write edit: %v", err)
						return
					}
					model.set(next, body, false)
					mine[i] = next
				default:
					i := rng.IntN(len(mine))
					cm := mine[i]
					mine = append(mine[:i], mine[i+1:]...)
					if err := rw.Delete(ctx, cm); err != nil {
						t.Errorf("dual-write delete: %v", err)
						return
					}
					model.set(cm, "", true)
					dualDeleted.Store(KeyString(rw.OldKey(cm)), cm)
				}
			}
		}()
	}
	// The raw writer edits and deletes old items with the SDK, unaware of
	// the rewrite, until it is stopped before the last apply.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(9, 9))
		live := append([]map[string]types.AttributeValue(nil), raw...)
		for n := 0; len(live) > 0; n++ {
			select {
			case <-stopRaw:
				return
			case <-time.After(2 * time.Millisecond):
			}
			i := rng.IntN(len(live))
			cm := live[i]
			key := rw.OldKey(cm)
			if rng.IntN(4) == 0 {
				if _, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(rw.Spec().Table), Key: key}); err != nil {
					t.Errorf("raw delete: %v", err)
					return
				}
				live = append(live[:i], live[i+1:]...)
				model.set(cm, "", true)
				continue
			}
			body := fmt.Sprintf("edited raw %d", n)
			e, _ := expression.NewBuilder().WithCondition(expression.AttributeExists(expression.Name("PK"))).
				WithUpdate(expression.Set(expression.Name("body"), expression.Value(body))).Build()
			if _, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(rw.Spec().Table), Key: key,
				ConditionExpression: e.Condition(), UpdateExpression: e.Update(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}); err != nil {
				t.Errorf("raw edit: %v", err)
				return
			}
			model.set(cm, body, false)
		}
	}()
	// The reader: untouched comments are always found, comments deleted
	// through the helper never come back.
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		rng := rand.New(rand.NewPCG(3, 3))
		for {
			select {
			case <-stopWriters:
				return
			default:
			}
			cm := stable[rng.IntN(len(stable))]
			if _, err := rw.Get(ctx, cm); err != nil {
				t.Errorf("dual-read missed %s: %v", KeyString(rw.OldKey(cm)), err)
				return
			}
			dualDeleted.Range(func(_, v any) bool {
				ref := v.(map[string]types.AttributeValue)
				if _, err := rw.Get(ctx, ref); !errors.Is(err, metastore.ErrNotFound) {
					t.Errorf("deleted %s came back: %v", KeyString(rw.OldKey(ref)), err)
				}
				return false // one per round
			})
			reads.Add(1)
		}
	}()

	o := RewriteOptions{Segments: 3, PageSize: 7, Workers: 3, Settle: 60 * time.Millisecond}
	killed := func(run func(ctx context.Context, o RewriteOptions) error, pages int64) error {
		kctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ko := o
		ko.Progress = func(p sweep.Progress) {
			if p.Pages >= pages {
				cancel()
			}
		}
		return run(kctx, ko)
	}
	apply := func(ctx context.Context, o RewriteOptions) error { _, err := rw.Apply(ctx, o); return err }
	finalize := func(ctx context.Context, o RewriteOptions) error { _, err := rw.Finalize(ctx, o); return err }

	rng := rand.New(rand.NewPCG(42, 42))
	for range 3 {
		if err := killed(apply, 1+rng.Int64N(4)); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("killed apply: %v", err)
		}
	}
	if err := apply(ctx, o); err != nil {
		t.Fatal(err)
	}
	close(stopRaw)
	time.Sleep(20 * time.Millisecond)
	sum, err := rw.Apply(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("apply after the raw writer stopped: %v", sum.Counts)
	rep, err := rw.VerifyRewrite(ctx, VerifyOptions{Segments: 3, PageSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean {
		t.Fatalf("verify not clean with only dual-writers running: %v %v", rep.Counts, rep.Problems)
	}
	if rep.Counts[OutEqual] == 0 {
		t.Fatalf("verify saw no equal copy: %v", rep.Counts)
	}
	var kills int
	for ; kills < 30; kills++ {
		err := killed(finalize, 1+rng.Int64N(6))
		if err == nil {
			break
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("finalize: %v", err)
		}
	}
	if p, _ := rw.Phase(ctx); p != PhaseFinalized {
		t.Fatalf("phase %s after %d killed finalizes", p, kills)
	}
	time.Sleep(50 * time.Millisecond) // writers and reader on the finalized phase
	close(stopWriters)
	wg.Wait()
	<-readerDone
	if t.Failed() {
		return
	}
	t.Logf("%d dual-reads, %d finalize kills", reads.Load(), kills)

	// Every comment once, under its new key, with its latest body.
	byKey := map[string]map[string]types.AttributeValue{}
	for _, it := range scanAll(t, c, rw.Spec().Table) {
		if _, ok := it[rw.marker()]; ok {
			t.Errorf("%s still carries the marker", KeyString(rw.OldKey(it)))
		}
		if isComment(it) && strings.HasPrefix(str(it, "PK"), "WS#") {
			t.Errorf("old item %s left after finalize", KeyString(rw.OldKey(it)))
		}
		byKey[KeyString(rw.OldKey(it))] = it
	}
	live := 0
	for old, m := range model.items {
		nk, err := rw.NewKey(m.ref)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := byKey[KeyString(nk)]
		switch {
		case m.deleted && ok:
			t.Errorf("deleted %s came back at %s", old, KeyString(nk))
		case !m.deleted && !ok:
			t.Errorf("%s missing at %s", old, KeyString(nk))
		case !m.deleted && str(got, "body") != m.body:
			t.Errorf("%s: body %q, latest written %q", old, str(got, "body"), m.body)
		}
		if !m.deleted {
			live++
		}
	}
	n := 0
	for _, it := range byKey {
		if isComment(it) {
			n++
		}
	}
	if n != live {
		t.Errorf("%d comments in the table, %d expected", n, live)
	}
}

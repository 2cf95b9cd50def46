package reshape

import (
	"context"
	"errors"
	"maps"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/sweep"
)

var fastRewrite = RewriteOptions{Segments: 3, PageSize: 9, Workers: 3, Settle: 40 * time.Millisecond}

// tableDump renders every item of the table, sorted, for comparisons.
func tableDump(t *testing.T, api API, table string) []string {
	t.Helper()
	var out []string
	for _, it := range scanAll(t, api, table) {
		names := make([]string, 0, len(it))
		for n := range it {
			names = append(names, n)
		}
		sort.Strings(names)
		var sb strings.Builder
		for _, n := range names {
			sb.WriteString(n + "=" + KeyString(map[string]types.AttributeValue{"": it[n]})[1:] + ";")
		}
		out = append(out, sb.String())
	}
	sort.Strings(out)
	return out
}

// TestRewriteRollbackRestoresTable: after apply, a rollback killed at
// random pages and run again deletes every copy and leaves the table
// exactly as it was; finalize is then refused (no verify since), apply may
// start again, and a rollback is refused once finalize has begun.
func TestRewriteRollbackRestoresTable(t *testing.T) {
	opts := DemoOptions{Workspaces: 2, MembersPerWS: 3, DocsPerWS: 2, CommentsPerDoc: 8}
	c, rw := rewriteDemo(t, opts, nil)
	ctx := t.Context()
	before := tableDump(t, c, rw.Spec().Table)
	dry := fastRewrite
	dry.DryRun = true
	sum, err := rw.Apply(ctx, dry)
	if err != nil || sum.Counts[OutCopied] != 32 {
		t.Fatalf("dry run: %v %v, want 32 to copy", err, sum.Counts)
	}
	if p, _ := rw.Phase(ctx); p != PhaseNew || strings.Join(tableDump(t, c, rw.Spec().Table), "\n") != strings.Join(before, "\n") {
		t.Fatalf("dry run wrote: phase %s", p)
	}
	if _, err := rw.Apply(ctx, fastRewrite); err != nil {
		t.Fatal(err)
	}
	if n := len(scanAll(t, c, rw.Spec().Table)); n != len(before)+32 {
		t.Fatalf("%d items after apply, want %d", n, len(before)+32)
	}
	if _, err := rw.VerifyRewrite(ctx, VerifyOptions{}); err != nil {
		t.Fatal(err)
	}
	if runs := rollbackKilled(t, rw, 31, func(kills int, p sweep.Progress) bool { return p.Pages >= int64(1+kills%3) }); runs == nil {
		t.Fatal("rollback never finished")
	}
	if after := tableDump(t, c, rw.Spec().Table); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("table after rollback differs from before apply:\n%d items, want %d", len(after), len(before))
	}
	if _, err := rw.Finalize(ctx, fastRewrite); !errors.Is(err, metastore.ErrRefused) {
		t.Fatalf("finalize after rollback: %v, want refused", err)
	}
	if _, err := rw.Apply(ctx, fastRewrite); err != nil {
		t.Fatalf("apply after rollback: %v", err)
	}
	if rep, err := rw.VerifyRewrite(ctx, VerifyOptions{}); err != nil || !rep.Clean {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	if _, err := rw.Finalize(ctx, fastRewrite); err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Rollback(ctx, fastRewrite); !errors.Is(err, metastore.ErrRefused) {
		t.Fatalf("rollback after finalize: %v, want refused", err)
	}
	if _, err := rw.Apply(ctx, fastRewrite); !errors.Is(err, metastore.ErrRefused) {
		t.Fatalf("apply after finalize: %v, want refused", err)
	}
}

// hookAPI runs a hook before each TransactWriteItems.
type hookAPI struct {
	RewriteAPI
	mu     sync.Mutex
	before func(in *dynamodb.TransactWriteItemsInput)
}

func (h *hookAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	h.mu.Lock()
	f := h.before
	h.mu.Unlock()
	if f != nil {
		f(in)
	}
	return h.RewriteAPI.TransactWriteItems(ctx, in, o...)
}

// appliedHookedDemo is a small demo table whose rewrite was applied, its
// client hooked (hookAPI), and its comments.
func appliedHookedDemo(t *testing.T) (*dynamodb.Client, *Rewrite, *hookAPI, []map[string]types.AttributeValue) {
	t.Helper()
	opts := DemoOptions{Workspaces: 1, MembersPerWS: 2, DocsPerWS: 1, CommentsPerDoc: 4}
	var hook *hookAPI
	c, rw := rewriteDemo(t, opts, func(a RewriteAPI) RewriteAPI { hook = &hookAPI{RewriteAPI: a}; return hook })
	if _, err := rw.Apply(t.Context(), fastRewrite); err != nil {
		t.Fatal(err)
	}
	return c, rw, hook, demoComments(opts)
}

// TestRewriteOrphanRemovedOnlyWhileOldAbsent is the regression test of
// issue 9's bug, not built twice (issue 15): an old writer deletes an old
// item, leaving its copy an orphan, and re-creates it just as apply is about
// to delete the orphan. The deletion's transaction checks the old item is
// still absent, so it fails; apply re-reads and keeps the copy, which is
// then repaired. An orphan whose old item stays absent is removed.
func TestRewriteOrphanRemovedOnlyWhileOldAbsent(t *testing.T) {
	c, rw, hook, cms := appliedHookedDemo(t)
	ctx := t.Context()
	table := rw.Spec().Table
	back, gone := cms[0], cms[1]
	for _, cm := range []map[string]types.AttributeValue{back, gone} {
		if _, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: rw.OldKey(cm)}); err != nil {
			t.Fatal(err)
		}
	}
	// Re-create `back`, edited, right before apply's first attempt to
	// delete its copy.
	backNew, _ := rw.NewKey(back)
	edited := map[string]types.AttributeValue{}
	for k, v := range back {
		edited[k] = v
	}
	edited["body"] = &types.AttributeValueMemberS{Value: "re-created by an old writer"}
	var once sync.Once
	hook.before = func(in *dynamodb.TransactWriteItemsInput) {
		for _, it := range in.TransactItems {
			if it.Delete != nil && rw.sameKey(it.Delete.Key, backNew) {
				once.Do(func() {
					if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: edited}); err != nil {
						t.Error(err)
					}
				})
			}
		}
	}
	sum, err := rw.Apply(ctx, RewriteOptions{Segments: 1, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Counts[OutOrphanRemoved] != 1 || sum.Counts["retries"] < 1 {
		t.Fatalf("apply counts %v: want one orphan removed and a failed condition", sum.Counts)
	}
	cp, err := rw.read(ctx, backNew)
	if err != nil || cp == nil {
		t.Fatalf("the copy of the re-created item was deleted: %v", err)
	}
	goneNew, _ := rw.NewKey(gone)
	if g, _ := rw.read(ctx, goneNew); g != nil {
		t.Fatal("the orphan of the deleted item survived apply")
	}
	// The copy may hold the body from before the re-creation: one more
	// apply repairs it, and verify is clean.
	if _, err := rw.Apply(ctx, fastRewrite); err != nil {
		t.Fatal(err)
	}
	rep, err := rw.VerifyRewrite(ctx, VerifyOptions{})
	if err != nil || !rep.Clean {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	if got, _ := rw.Get(ctx, back); str(got, "body") != "re-created by an old writer" {
		t.Fatalf("dual-read of the re-created item: %v", got)
	}
}

// TestRewriteCollisions: a template that maps several comments to one new
// key is reported by plan before anything is written; apply copies the
// first claimant and never overwrites its copy with another, verify is not
// clean and finalize is refused.
func TestRewriteCollisions(t *testing.T) {
	opts := DemoOptions{Workspaces: 1, MembersPerWS: 2, DocsPerWS: 1, CommentsPerDoc: 6}
	c, s, _ := demoTable(t, opts)
	spec, err := Parse([]byte(`{"kind":"rewrite-key","table":"` + s.Table + `","covers":{"keyPrefixes":{"PK":"WS#"},"present":["commentId"]},"rewrite":{"key":{"PK":"MEMBER#{memberId}","SK":"LATEST"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	rw, err := NewRewrite(t.Context(), c, spec, stateStore(t))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := rw.PlanRewrite(t.Context(), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	members := map[string]bool{}
	for _, cm := range demoComments(opts) {
		members[str(cm, "memberId")] = true
	}
	if plan.Covered != 6 || len(plan.Collisions) == 0 || plan.DistinctKeys != len(members) || len(plan.Hottest) == 0 {
		t.Fatalf("plan: covered %d, collisions %v", plan.Covered, plan.Collisions)
	}
	if n := len(scanAll(t, c, s.Table)); n != len(DemoItems(opts)) {
		t.Fatalf("plan wrote: %d items", n)
	}
	sum, err := rw.Apply(t.Context(), fastRewrite)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Counts[OutCopied] != int64(len(members)) || sum.Counts[OutCollision] != int64(6-len(members)) {
		t.Fatalf("apply: %v, want %d copied and %d collisions", sum.Counts, len(members), 6-len(members))
	}
	rep, err := rw.VerifyRewrite(t.Context(), VerifyOptions{})
	if err != nil || rep.Clean || rep.Counts[OutCollision] != int64(6-len(members)) {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	if _, err := rw.Finalize(t.Context(), fastRewrite); !errors.Is(err, metastore.ErrRefused) {
		t.Fatalf("finalize after an unclean verify: %v", err)
	}
}

// TestRollbackKilledAfterACleanPassFinishes: a run killed right after the
// last page of a pass leaves that pass's verdict behind. The run after a
// pass that wrote sweeps once more; the run after a clean one records
// rolled-back without sweeping. (Before, a completed pass was forgotten, so
// runs killed at each pass's end never finished.)
func TestRollbackKilledAfterACleanPassFinishes(t *testing.T) {
	opts := DemoOptions{Workspaces: 2, MembersPerWS: 2, DocsPerWS: 2, CommentsPerDoc: 3}
	c, rw := rewriteDemo(t, opts, nil)
	ctx := t.Context()
	before := tableDump(t, c, rw.Spec().Table)
	if _, err := rw.Apply(ctx, fastRewrite); err != nil {
		t.Fatal(err)
	}
	runs := rollbackKilled(t, rw, 4, func(_ int, p sweep.Progress) bool { return p.SegmentsDone == p.Segments })
	if runs == nil {
		t.Fatal("rollback killed at each pass's end did not finish in 4 runs")
	}
	// Run 1: the pass deleting the copies; run 2: the clean pass; run 3
	// finds it complete and clean and sweeps nothing.
	if len(runs) != 3 || len(runs[2]) != 0 {
		t.Fatalf("runs: %+v, want 3, the last without a pass", runs)
	}
	if runs[0][0].Counts[OutRemoved] == 0 || runs[1][0].Counts[OutRemoved] != 0 {
		t.Fatalf("first pass removed %d, second %d: want copies removed by the first alone",
			runs[0][0].Counts[OutRemoved], runs[1][0].Counts[OutRemoved])
	}
	if after := tableDump(t, c, rw.Spec().Table); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("table after rollback differs from before apply: %d items, want %d", len(after), len(before))
	}
	// A later rollback of a new apply sweeps again: the finished pass's
	// cursors were forgotten.
	if _, err := rw.Apply(ctx, fastRewrite); err != nil {
		t.Fatal(err)
	}
	res, err := rw.Rollback(ctx, fastRewrite)
	if err != nil || res.Phase != PhaseRolledBack || res.Counts()[OutRemoved] == 0 {
		t.Fatalf("second rollback: %v, phase %s, counts %v", err, res.Phase, res.Counts())
	}
	if after := tableDump(t, c, rw.Spec().Table); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("table after the second rollback differs from before apply")
	}
}

// rollbackKilled runs Rollback again and again, each run killed (its
// context cancelled) once kill says so of its progress, until a run ends
// rolled back; it returns each run's passes, or nil if none ended within
// max runs.
func rollbackKilled(t *testing.T, rw *Rewrite, max int, kill func(run int, p sweep.Progress) bool) [][]sweep.Summary {
	t.Helper()
	var runs [][]sweep.Summary
	for run := range max {
		kctx, cancel := context.WithCancel(t.Context())
		o := fastRewrite
		o.Progress = func(p sweep.Progress) {
			if kill(run, p) {
				cancel()
			}
		}
		res, err := rw.Rollback(kctx, o)
		cancel()
		runs = append(runs, res.Passes)
		if err == nil {
			if res.Phase != PhaseRolledBack {
				t.Fatalf("rollback ended in %s", res.Phase)
			}
			return runs
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	return nil
}

// TestRewriteDeleteRacingApplyCopy: apply copies an item between the
// dual-write helper's reads and its transaction (the helper read no copy,
// so it deletes the old item alone). The helper's transaction must check
// the new key is still absent: without that check the old item went and its
// fresh copy stayed, and the dual-read found the deleted item again (the
// failure TestRewriteLiveWritersKillsConverge hit once in CI). The same
// race against a key-changing Replace must not leave a stale copy at the
// former new key.
func TestRewriteDeleteRacingApplyCopy(t *testing.T) {
	c, rw, hook, cms := appliedHookedDemo(t)
	ctx := t.Context()
	table := rw.Spec().Table
	// Two items whose copies are absent: an old writer made them after
	// apply (here: their copies deleted by hand).
	for _, cm := range cms[:2] {
		nk, _ := rw.NewKey(cm)
		if _, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: nk}); err != nil {
			t.Fatal(err)
		}
	}
	// Right before the helper's first transaction on an item, apply
	// copies it (as apply's sweep would, from a scan of the old item).
	var inHook atomic.Bool
	copyFirst := func(cm map[string]types.AttributeValue) {
		var once atomic.Bool
		hook.mu.Lock()
		hook.before = func(in *dynamodb.TransactWriteItemsInput) {
			if inHook.Load() || !once.CompareAndSwap(false, true) {
				return
			}
			inHook.Store(true)
			defer inHook.Store(false)
			old, err := rw.read(ctx, rw.OldKey(cm))
			if err != nil || old == nil {
				t.Errorf("read the old item: %v %v", old, err)
				return
			}
			if out, _, err := rw.copyItem(ctx, old, nil, false); err != nil || out != OutCopied {
				t.Errorf("apply's copy: %s %v", out, err)
			}
		}
		hook.mu.Unlock()
	}

	deleted := cms[0]
	copyFirst(deleted)
	if err := rw.Delete(ctx, deleted); err != nil {
		t.Fatal(err)
	}
	if got, err := rw.Get(ctx, deleted); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("deleted item came back: %v %v", got, err)
	}
	nk, _ := rw.NewKey(deleted)
	if cp, _ := rw.read(ctx, nk); cp != nil {
		t.Fatalf("the copy of the deleted item outlived it: %v", cp)
	}

	// A Replace that moves the new key, raced the same way: apply's copy
	// lands at the former new key, which the Replace must not leave.
	moved := cms[1]
	formerNew, _ := rw.NewKey(moved)
	next := maps.Clone(moved)
	next["memberId"] = &types.AttributeValueMemberS{Value: "u9moved"}
	next["body"] = &types.AttributeValueMemberS{Value: "handed over"}
	copyFirst(moved)
	if err := rw.Replace(ctx, moved, next); err != nil {
		t.Fatal(err)
	}
	if cp, _ := rw.read(ctx, formerNew); cp != nil {
		t.Fatalf("a stale copy was left at the former new key: %v", cp)
	}
	if got, err := rw.Get(ctx, next); err != nil || str(got, "body") != "handed over" {
		t.Fatalf("dual-read after the replace: %v %v", got, err)
	}
	hook.mu.Lock()
	hook.before = nil
	hook.mu.Unlock()
	rep, err := rw.VerifyRewrite(ctx, VerifyOptions{})
	if err != nil || !rep.Clean {
		t.Fatalf("verify after the raced helpers: %v %+v", err, rep)
	}
}

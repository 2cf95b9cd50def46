package reshape

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// slowIndex makes the real client's index look CREATING, then ACTIVE but
// backfilling, for the first describes after the index appears: what
// DynamoDB answers for minutes on a large table and DynamoDB Local never
// does.
type slowIndex struct {
	API
	creating, backfilling int64
	seen                  atomic.Int64
	scansBeforeReady      atomic.Int64
	ready                 atomic.Bool
}

func (s *slowIndex) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	out, err := s.API.DescribeTable(ctx, in, o...)
	if err != nil || len(out.Table.GlobalSecondaryIndexes) == 0 {
		return out, err
	}
	n := s.seen.Add(1)
	g := &out.Table.GlobalSecondaryIndexes[0]
	switch {
	case n <= s.creating:
		g.IndexStatus, g.Backfilling = types.IndexStatusCreating, aws.Bool(false)
	case n <= s.creating+s.backfilling:
		g.IndexStatus, g.Backfilling = types.IndexStatusActive, aws.Bool(true)
	case g.IndexStatus == types.IndexStatusActive && !aws.ToBool(g.Backfilling):
		// Then DynamoDB Local's own answer, which may be CREATING a while.
		s.ready.Store(true)
	}
	return out, nil
}

func (s *slowIndex) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	if !s.ready.Load() {
		s.scansBeforeReady.Add(1)
	}
	return s.API.Scan(ctx, in, o...)
}

// TestApplyWaitsForIndex: apply adds the index and waits, reporting progress,
// while it is CREATING and then backfilling, and sweeps only once it is
// ACTIVE.
func TestApplyWaitsForIndex(t *testing.T) {
	client, spec, demo := demoTable(t, DemoOptions{Workspaces: 1})
	api := &slowIndex{API: client, creating: 4, backfilling: 3}
	r := newReshaper(t, api, spec)
	var mu sync.Mutex
	var statuses []string
	res, err := r.Apply(t.Context(), ApplyOptions{Index: IndexOptions{PollInterval: 10 * time.Millisecond, Progress: func(st IndexStatus) {
		mu.Lock()
		defer mu.Unlock()
		statuses = append(statuses, st.Status+map[bool]string{true: "+backfilling"}[st.Backfilling])
	}}})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(statuses, ",")
	want := "CREATING,CREATING,CREATING,CREATING,ACTIVE+backfilling,ACTIVE+backfilling,ACTIVE+backfilling,"
	if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, ",ACTIVE") || strings.Count(got+",", ",ACTIVE,") != 1 {
		t.Fatalf("progress %s, want %s then DynamoDB Local's own states ending at one ACTIVE", got, want)
	}
	if n := api.scansBeforeReady.Load(); n != 0 {
		t.Fatalf("%d scans before the index was ACTIVE", n)
	}
	if !res.IndexCreated || res.Sweep.Counts["wrote"] != int64(demo.Comments) {
		t.Fatalf("apply: created=%v counts=%v, %d comments", res.IndexCreated, res.Sweep.Counts, demo.Comments)
	}
	// What --max-wcu counts: DynamoDB's report of each write, the index
	// entry included (1 unit for the item, 1 for the index).
	if got, want := res.Sweep.WriteUnits, float64(2*demo.Comments); got != want {
		t.Fatalf("apply counted %v write units, DynamoDB reported %v", got, want)
	}
}

// laggingIndex omits the hidden items from the first lag index queries
// that return any of them: a GSI is eventually consistent
// even once ACTIVE.
type laggingIndex struct {
	API
	lag     int64
	queries atomic.Int64
	hidden  sync.Map // KeyString → true
}

func (l *laggingIndex) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := l.API.Query(ctx, in, o...)
	if err != nil || in.IndexName == nil {
		return out, err
	}
	kept := out.Items[:0:0]
	for _, it := range out.Items {
		if _, h := l.hidden.Load(KeyString(map[string]types.AttributeValue{"PK": it["PK"], "SK": it["SK"]})); !h {
			kept = append(kept, it)
		}
	}
	if len(kept) < len(out.Items) && l.queries.Add(1) <= l.lag {
		out.Items = kept
	}
	return out, nil
}

// TestVerifyAllowsIndexLag: verify retries a sampled key whose index answer
// lags behind the table and then matches; with too few retries for the lag
// it reports the mismatch and incomplete coverage.
func TestVerifyAllowsIndexLag(t *testing.T) {
	client, spec, _ := demoTable(t, DemoOptions{Workspaces: 1, MembersPerWS: 3})
	if _, err := newReshaper(t, client, spec).Apply(t.Context(), ApplyOptions{Index: fastIndex}); err != nil {
		t.Fatal(err)
	}
	hideAll := func(l *laggingIndex) {
		for _, it := range scanAll(t, client, spec.Table) {
			if isComment(it) && str(it, "memberId") == DemoMember {
				l.hidden.Store(KeyString(map[string]types.AttributeValue{"PK": it["PK"], "SK": it["SK"]}), true)
			}
		}
	}
	l := &laggingIndex{API: client, lag: 2}
	hideAll(l)
	rep, err := newReshaper(t, l, spec).Verify(t.Context(), VerifyOptions{RetryDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete || rep.IndexCheck.Retries == 0 || rep.IndexCheck.Matched != rep.IndexCheck.Checked {
		t.Fatalf("lag of 2 queries: complete=%v index %+v", rep.Complete, rep.IndexCheck)
	}
	l = &laggingIndex{API: client, lag: 1000}
	hideAll(l)
	rep, err = newReshaper(t, l, spec).Verify(t.Context(), VerifyOptions{RetryDelay: time.Millisecond, IndexRetries: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Complete || len(rep.IndexCheck.Mismatches) != 1 || rep.IndexCheck.Mismatches[0].Value != "MEMBER#"+DemoMember || len(rep.IndexCheck.Mismatches[0].Missing) == 0 {
		t.Fatalf("lasting lag: complete=%v index %+v", rep.Complete, rep.IndexCheck)
	}
}

// TestIndexWaitIsBounded: an index that stays CREATING past MaxWait ends
// the wait with an error naming its status, and no item is swept.
func TestIndexWaitIsBounded(t *testing.T) {
	client, spec, _ := demoTable(t, DemoOptions{Workspaces: 1})
	api := &slowIndex{API: client, creating: 1 << 30}
	r := newReshaper(t, api, spec)
	_, err := r.Apply(t.Context(), ApplyOptions{Index: IndexOptions{PollInterval: 10 * time.Millisecond, MaxWait: 150 * time.Millisecond}})
	if err == nil || !strings.Contains(err.Error(), "still CREATING after 150ms") {
		t.Fatalf("apply: %v, want the bounded wait's error", err)
	}
	if n := api.scansBeforeReady.Load(); n != 0 {
		t.Fatalf("%d scans before the index was ACTIVE", n)
	}
	// Leave DynamoDB Local's index build finished before the table is
	// deleted: the emulator is shared by every test of the run.
	r.api = client
	if err := r.waitIndex(t.Context(), IndexOptions{PollInterval: 20 * time.Millisecond, MaxWait: time.Minute}); err != nil {
		t.Fatal(err)
	}
}

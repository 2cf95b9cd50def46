package sweep_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/lakemeta/lake/sweep"
)

// newTable creates a table of n items with HASH key "id" (S) and returns its
// name.
func newTable(t *testing.T, c *dynamodb.Client, n int) string {
	t.Helper()
	name := ddblocal.TableName(t)
	ddblocal.CreateTable(t, c, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	var batch []types.WriteRequest
	flush := func() {
		if len(batch) == 0 {
			return
		}
		req := map[string][]types.WriteRequest{name: batch}
		for len(req) > 0 {
			out, err := c.BatchWriteItem(t.Context(), &dynamodb.BatchWriteItemInput{RequestItems: req})
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			req = out.UnprocessedItems
		}
		batch = nil
	}
	for i := range n {
		batch = append(batch, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: fmt.Sprintf("item-%05d", i)},
			"n":  &types.AttributeValueMemberN{Value: fmt.Sprint(i)},
		}}})
		if len(batch) == 25 {
			flush()
		}
	}
	flush()
	return name
}

func checkpoints(t *testing.T) sweep.StoreCheckpoints {
	t.Helper()
	d, err := boltstore.Open(filepath.Join(t.TempDir(), "state.db"), &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s := metastore.New(d)
	t.Cleanup(func() { s.Close() })
	return sweep.StoreCheckpoints{Store: s, Prefix: "sweep/test/"}
}

// seen records how many times each item reached a handler.
type seen struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *seen) add(p *sweep.Page) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	for _, it := range p.Items {
		s.n[it["id"].(*types.AttributeValueMemberS).Value]++
	}
}

func TestVisitsEveryItemOnce(t *testing.T) {
	c := ddblocal.Client(t)
	const items = 1000
	table := newTable(t, c, items)
	for _, segments := range []int{1, 4} {
		t.Run(fmt.Sprint("segments=", segments), func(t *testing.T) {
			var s seen
			var calls atomic.Int64
			sum, err := sweep.Run(t.Context(), c, sweep.Options{Table: table, Segments: segments, PageSize: 37, ConsistentRead: true, Checkpoints: checkpoints(t)},
				func(_ context.Context, p *sweep.Page) error {
					calls.Add(1)
					s.add(p)
					p.Count("visited", int64(len(p.Items)))
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
			if len(s.n) != items {
				t.Fatalf("visited %d distinct items, want %d", len(s.n), items)
			}
			for id, n := range s.n {
				if n != 1 {
					t.Fatalf("item %s visited %d times", id, n)
				}
			}
			if !sum.Complete || sum.Items != items || sum.Scanned != items || sum.Counts["visited"] != items || sum.Pages != calls.Load() {
				t.Fatalf("summary %+v", sum)
			}
			if sum.Requests < sum.Pages || sum.ReadUnits <= 0 {
				t.Fatalf("summary counts no requests or read units: %+v", sum)
			}
		})
	}
}

// TestResumeRedoesAtMostOnePagePerSegment stops a sweep by a handler error
// several times and checks that the reruns, with another --segments, use the
// recorded count and redo at most one page per segment each time.
func TestResumeRedoesAtMostOnePagePerSegment(t *testing.T) {
	c := ddblocal.Client(t)
	const items, page, segments = 600, 20, 4
	table := newTable(t, c, items)
	cp := checkpoints(t)
	var s seen
	boom := errors.New("boom")
	stops := 0
	for run := 0; ; run++ {
		if run > 50 {
			t.Fatal("the sweep never completed")
		}
		var pages atomic.Int64
		sum, err := sweep.Run(t.Context(), c, sweep.Options{Table: table, Segments: segments + run, PageSize: page, ConsistentRead: true, Checkpoints: cp},
			func(_ context.Context, p *sweep.Page) error {
				// Every run stops at its fifth page, after writing half of it.
				if pages.Add(1) == 5 {
					half := *p
					half.Items = p.Items[:len(p.Items)/2]
					s.add(&half)
					return boom
				}
				s.add(p)
				return nil
			})
		if run > 0 && !sum.Resumed {
			t.Fatalf("run %d did not resume", run)
		}
		if sum.Segments != segments {
			t.Fatalf("run %d used %d segments, want the recorded %d", run, sum.Segments, segments)
		}
		if err == nil {
			if !sum.Complete {
				t.Fatal("no error but not complete")
			}
			break
		}
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		stops++
	}
	if stops == 0 {
		t.Fatal("the sweep never stopped: the test proves nothing")
	}
	if len(s.n) != items {
		t.Fatalf("visited %d distinct items, want %d", len(s.n), items)
	}
	redone := 0
	for _, n := range s.n {
		redone += n - 1
	}
	// Each stop may redo, per segment, the page in flight (the failed one
	// and one prefetched or finished but not saved).
	if max := stops * segments * page; redone > max {
		t.Fatalf("%d item visits redone over %d stops, more than one page per segment (%d)", redone, stops, max)
	}
	st, err := cp.Load(t.Context())
	if err != nil || st == nil || !st.Done() {
		t.Fatalf("state after completion: %+v, %v", st, err)
	}
	// A completed sweep run again does nothing.
	sum, err := sweep.Run(t.Context(), c, sweep.Options{Table: table, Checkpoints: cp}, func(context.Context, *sweep.Page) error {
		t.Error("handler called on a completed sweep")
		return nil
	})
	if err != nil || !sum.Complete || sum.Requests != 0 {
		t.Fatalf("rerun of a completed sweep: %+v, %v", sum, err)
	}
	if err := cp.Reset(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st, err := cp.Load(t.Context()); err != nil || st != nil {
		t.Fatalf("after Reset: %+v, %v", st, err)
	}
}

func TestDryRunWritesNoCursor(t *testing.T) {
	c := ddblocal.Client(t)
	table := newTable(t, c, 100)
	cp := checkpoints(t)
	var dry atomic.Bool
	dry.Store(true)
	sum, err := sweep.Run(t.Context(), c, sweep.Options{Table: table, Segments: 2, PageSize: 10, DryRun: true, Checkpoints: cp},
		func(_ context.Context, p *sweep.Page) error {
			if !p.DryRun {
				dry.Store(false)
			}
			return nil
		})
	if err != nil || sum.Items != 100 || !dry.Load() {
		t.Fatalf("dry run: %+v, %v, every page dry: %v", sum, err, dry.Load())
	}
	if st, err := cp.Load(t.Context()); err != nil || st != nil {
		t.Fatalf("a dry run recorded state: %+v, %v", st, err)
	}
}

func TestBadOptions(t *testing.T) {
	for _, o := range []sweep.Options{
		{},
		{Table: "t", Segments: -1},
		{Table: "t", Segments: sweep.MaxSegments + 1},
		{Table: "t", PageSize: sweep.MaxPageSize + 1},
		{Table: "t", MaxWCU: -1},
	} {
		if _, err := sweep.Run(context.Background(), nil, o, nil); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}

func TestCursorJSON(t *testing.T) {
	in := sweep.Cursor{Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "a/b"},
		"n":  &types.AttributeValueMemberN{Value: "42"},
		"b":  &types.AttributeValueMemberB{Value: []byte{0, 1, 255}},
	}}
	b, err := in.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var out sweep.Cursor
	if err := out.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	if out.Key["pk"].(*types.AttributeValueMemberS).Value != "a/b" || out.Key["n"].(*types.AttributeValueMemberN).Value != "42" ||
		string(out.Key["b"].(*types.AttributeValueMemberB).Value) != "\x00\x01\xff" || out.Done {
		t.Fatalf("round trip: %s -> %+v", b, out)
	}
	if _, err := (sweep.Cursor{Key: map[string]types.AttributeValue{"x": &types.AttributeValueMemberBOOL{Value: true}}}).MarshalJSON(); err == nil {
		t.Fatal("a BOOL key attribute was encoded")
	}
	for _, bad := range []string{`{"key":{"x":{"Q":"1"}}}`, `{"key":{"x":{"B":"!!"}}}`, `{"key":{"x":{}}}`, `[`} {
		if err := new(sweep.Cursor).UnmarshalJSON([]byte(bad)); err == nil {
			t.Errorf("bad cursor %s accepted", bad)
		}
	}
}

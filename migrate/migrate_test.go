package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/migrate"
)

const refresh = 50 * time.Millisecond

type env struct {
	t     *testing.T
	api   *dynamodb.Client
	table string
}

func newEnv(t *testing.T) *env {
	api := ddb.NewClient(ddblocal.Config(t), "")
	return &env{t: t, api: api, table: ddblocal.Tables(t, api, dynamostore.Options{}).Table}
}

// store opens a store as a node would (layout auto).
func (e *env) store(refreshEvery time.Duration) (*metastore.Store, *dynamostore.Driver) {
	e.t.Helper()
	d, err := dynamostore.Open(context.Background(), e.api, dynamostore.Options{Table: e.table, Refresh: refreshEvery})
	if err != nil {
		e.t.Fatal(err)
	}
	return metastore.New(d), d
}

func (e *env) migrator(opts *migrate.Options) *migrate.Migrator {
	e.t.Helper()
	_, d := e.store(refresh)
	o := migrate.Options{Refresh: refresh, PageSize: 7}
	if opts != nil {
		o = *opts
		if o.Refresh == 0 {
			o.Refresh = refresh
		}
	}
	if o.Settle == nil {
		// DynamoDB Local delivers stream records at once; the default
		// settle delay would only slow every finalize of the suite.
		o.Settle = new(4 * refresh)
	}
	m, err := migrate.New(d, &o)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *env) run(m *migrate.Migrator, steps ...string) {
	e.t.Helper()
	for _, s := range steps {
		if err := m.Run(context.Background(), s); err != nil {
			e.t.Fatalf("step %s: %v", s, err)
		}
	}
}

// raw reads a copy straight from a table with the SDK.
func (e *env) raw(v2 bool, key string) (string, bool) {
	e.t.Helper()
	in := &dynamodb.GetItemInput{TableName: aws.String(e.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}}}
	if v2 {
		in.TableName = aws.String(e.table + dynamostore.V2Suffix)
		in.Key["bucket"] = &types.AttributeValueMemberS{Value: bucketOf(key)}
	}
	out, err := e.api.GetItem(context.Background(), in)
	if err != nil {
		e.t.Fatal(err)
	}
	if out.Item == nil {
		return "", false
	}
	return string(out.Item["v"].(*types.AttributeValueMemberB).Value), true
}

// legacyPut writes v1 the way a legacy binary does: a plain PutItem with no
// stamp.
func (e *env) legacyPut(key, value string) {
	e.t.Helper()
	_, err := e.api.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: key}, "v": &types.AttributeValueMemberB{Value: []byte(value)}}})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) wantBoth(key, want string) {
	e.t.Helper()
	v1, ok1 := e.raw(false, key)
	v2, ok2 := e.raw(true, key)
	if !ok1 || !ok2 || v1 != want || v2 != want {
		e.t.Fatalf("%s: v1 = %q (%v), v2 = %q (%v); want %q in both", key, v1, ok1, v2, ok2, want)
	}
}

func (e *env) wantNeither(key string) {
	e.t.Helper()
	if _, ok := e.raw(false, key); ok {
		e.t.Fatalf("%s still in v1", key)
	}
	if _, ok := e.raw(true, key); ok {
		e.t.Fatalf("%s still in v2", key)
	}
}

func seed(t *testing.T, s *metastore.Store, n int) {
	t.Helper()
	for i := range n {
		k := fmt.Sprintf("tbl/t%03d", i)
		if i%3 == 1 {
			k = fmt.Sprintf("append-operation/t%03d/%06d", i%5, i)
		}
		if err := s.Put(context.Background(), k, []byte("v:"+k)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCASChecksAuthorityAndAppliesBothWrites: "cas checks the current
// authority value and applies both physical writes in one Dynamo
// transaction."
func TestCASChecksAuthorityAndAppliesBothWrites(t *testing.T) {
	e := newEnv(t)
	s, _ := e.store(refresh)
	ctx := t.Context()
	s.Put(ctx, "tbl/a", []byte("1")) // pre-upgrade: v1 only
	e.run(e.migrator(nil), "dual")
	time.Sleep(2 * refresh)
	if err := s.CAS(ctx, "tbl/a", metastore.ExpectValue([]byte("1")), []byte("2")); err != nil {
		t.Fatalf("CAS over a missing v2 copy: %v", err)
	}
	e.wantBoth("tbl/a", "2")
	if err := s.CAS(ctx, "tbl/a", metastore.ExpectValue([]byte("1")), []byte("3")); !errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("stale CAS: %v", err)
	}
	e.wantBoth("tbl/a", "2")
	if err := s.CAS(ctx, "tbl/new", metastore.ExpectAbsent(), []byte("n")); err != nil {
		t.Fatal(err)
	}
	e.wantBoth("tbl/new", "n")
}

// TestMissingV2AcceptedDifferentFailsClosed: "A v2 record may be absent for
// a pre-upgrade key, but a conflicting non-equal value fails closed."
func TestMissingV2AcceptedDifferentFailsClosed(t *testing.T) {
	e := newEnv(t)
	s, _ := e.store(refresh)
	ctx := t.Context()
	s.Put(ctx, "tbl/a", []byte("1"))
	e.run(e.migrator(nil), "dual")
	time.Sleep(2 * refresh)
	// Corrupt v2 behind lake's back.
	d2, err := dynamostore.Open(ctx, e.api, dynamostore.Options{Table: e.table, Layout: dynamostore.LayoutV2})
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.Load(ctx, []metastore.Item{{Key: "tbl/a", Value: []byte("other")}}); err != nil {
		t.Fatal(err)
	}
	err = s.CAS(ctx, "tbl/a", metastore.ExpectValue([]byte("1")), []byte("2"))
	if !errors.Is(err, dynamostore.ErrDiverged) || errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("CAS over a divergent v2: %v, want ErrDiverged", err)
	}
	if v, _ := e.raw(false, "tbl/a"); v != "1" {
		t.Fatalf("v1 changed to %q though the transaction failed", v)
	}
	if err := s.Put(ctx, "tbl/a", []byte("3")); !errors.Is(err, dynamostore.ErrDiverged) {
		t.Fatalf("dual Put over a divergent v2: %v", err)
	}
}

// TestGuardedMutateChecksAuthorityGuard: "guarded_mutate checks the exact
// authority guard and exact target while updating both target copies
// atomically."
func TestGuardedMutateChecksAuthorityGuard(t *testing.T) {
	e := newEnv(t)
	s, _ := e.store(refresh)
	ctx := t.Context()
	s.Put(ctx, "lease/t", []byte("epoch-1"))
	e.run(e.migrator(nil), "dual")
	time.Sleep(2 * refresh)
	g := metastore.Guard{Key: "lease/t", Value: []byte("epoch-1")}
	if err := s.GuardedMutate(ctx, g, metastore.Mutation{Key: "tbl/t", Expect: metastore.ExpectAbsent(), Value: []byte("m1")}); err != nil {
		t.Fatal(err)
	}
	e.wantBoth("tbl/t", "m1")
	bad := metastore.Guard{Key: "lease/t", Value: []byte("epoch-0")}
	if err := s.GuardedMutate(ctx, bad, metastore.Mutation{Key: "tbl/t", Expect: metastore.ExpectValue([]byte("m1")), Value: []byte("m2")}); !errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("stale guard: %v", err)
	}
	e.wantBoth("tbl/t", "m1")
}

// TestDeleteRemovesBothCopies: "Delete removes both copies under the same
// exact expected value."
func TestDeleteRemovesBothCopies(t *testing.T) {
	e := newEnv(t)
	s, _ := e.store(refresh)
	ctx := t.Context()
	e.run(e.migrator(nil), "dual")
	time.Sleep(2 * refresh)
	s.Put(ctx, "tbl/d", []byte("x"))
	e.wantBoth("tbl/d", "x")
	if err := s.Delete(ctx, "tbl/d", []byte("y")); !errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("delete with the wrong value: %v", err)
	}
	e.wantBoth("tbl/d", "x")
	if err := s.Delete(ctx, "tbl/d", []byte("x")); err != nil {
		t.Fatal(err)
	}
	e.wantNeither("tbl/d")
}

// TestBackfillNeverOverwritesConcurrentWriter: "Backfill never overwrites a
// different v2 value from a concurrent writer." Writers CAS-increment shared
// keys while backfill, verify and finalization run; at the end v2 equals v1
// and every acknowledged increment is present.
func TestBackfillNeverOverwritesConcurrentWriter(t *testing.T) {
	e := newEnv(t)
	s, _ := e.store(refresh)
	ctx := t.Context()
	seed(t, s, 60)
	const counters = 4
	for i := range counters {
		s.Put(ctx, fmt.Sprintf("tbl/counter%d", i), []byte("0"))
	}
	m := e.migrator(nil)
	e.run(m, "dual")
	var acked [counters]atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 6 {
		ws, _ := e.store(refresh)
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("tbl/counter%d", (w+i)%counters)
				cur, err := ws.Get(ctx, k)
				if err != nil {
					errs <- err
					return
				}
				n, _ := strconv.Atoi(string(cur))
				err = ws.CAS(ctx, k, metastore.ExpectValue(cur), []byte(strconv.Itoa(n+1)))
				switch {
				case err == nil:
					acked[(w+i)%counters].Add(1)
				case errors.Is(err, metastore.ErrConflict), errors.Is(err, metastore.ErrWritesPaused):
				default:
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		})
	}
	time.Sleep(2 * refresh)
	e.run(m, "backfill", "verify")
	rep, err := m.Finalize(ctx)
	if err != nil {
		t.Fatalf("finalize: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // writers keep going in v2-authoritative
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range counters {
		k := fmt.Sprintf("tbl/counter%d", i)
		e.wantBoth(k, strconv.FormatInt(acked[i].Load(), 10))
	}
	v, err := m.Verify(ctx)
	if err != nil || !v.Clean() {
		t.Fatalf("verify after finalization: %v %s", err, v.Summary())
	}
	t.Logf("finalize paused writes %v; re-verified %d keys; increments %d %d %d %d", rep.Pause, rep.Reverify.Checked,
		acked[0].Load(), acked[1].Load(), acked[2].Load(), acked[3].Load())
}

// TestStaleDualNodeCannotRegressV2: "A stale dual node encountering a newer
// v2 value fails its v1/v2 conditions; it cannot regress v2 and retries
// after observing the marker."
func TestStaleDualNodeCannotRegressV2(t *testing.T) {
	e := newEnv(t)
	fresh, _ := e.store(refresh)
	ctx := t.Context()
	m := e.migrator(nil)
	e.run(m, "dual")
	stale, _ := e.store(time.Hour) // caches dual for an hour
	if err := stale.Put(ctx, "tbl/x", []byte("1")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * refresh)
	e.run(m, "backfill", "verify", "finalize")
	time.Sleep(2 * refresh)
	if err := fresh.CAS(ctx, "tbl/x", metastore.ExpectValue([]byte("1")), []byte("2")); err != nil {
		t.Fatalf("v2-authoritative CAS: %v", err)
	}
	// The stale node still believes v1 ("1") is the authority.
	err := stale.CAS(ctx, "tbl/x", metastore.ExpectValue([]byte("1")), []byte("stale"))
	if !errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("stale CAS: %v, want a conflict after it observed the marker", err)
	}
	if v, _ := e.raw(true, "tbl/x"); v != "2" {
		t.Fatalf("v2 regressed to %q", v)
	}
	// Having observed the marker, it now writes through v2.
	if err := stale.CAS(ctx, "tbl/x", metastore.ExpectValue([]byte("2")), []byte("3")); err != nil {
		t.Fatalf("CAS after observing the marker: %v", err)
	}
	e.wantBoth("tbl/x", "3")
}

// countingAPI counts Scans per table.
type countingAPI struct {
	ddb.API
	mu    sync.Mutex
	scans map[string]int
}

func (c *countingAPI) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	c.mu.Lock()
	c.scans[aws.ToString(in.TableName)]++
	c.mu.Unlock()
	return c.API.Scan(ctx, in, o...)
}

// TestPrefixReadsNeverScanV1AfterMarker: "After the completion marker,
// prefix reads never fall back to a full v1 scan."
func TestPrefixReadsNeverScanV1AfterMarker(t *testing.T) {
	e := newEnv(t)
	s, _ := e.store(refresh)
	seed(t, s, 30)
	m := e.migrator(nil)
	e.run(m, "dual")
	time.Sleep(2 * refresh)
	e.run(m, "backfill", "verify", "finalize")
	api := &countingAPI{API: e.api, scans: map[string]int{}}
	d, err := dynamostore.Open(t.Context(), api, dynamostore.Options{Table: e.table})
	if err != nil {
		t.Fatal(err)
	}
	rs := metastore.New(d)
	for _, p := range []string{"tbl/", "", "t", "append-operation/"} {
		if _, err := rs.ListAll(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	if api.scans[e.table] != 0 || api.scans[e.table+dynamostore.V2Suffix] != 0 {
		t.Fatalf("scans after the marker: %v", api.scans)
	}
	items, _ := rs.ListAll(t.Context(), "tbl/")
	if len(items) != 20 {
		t.Fatalf("tbl/ after the marker: %d items", len(items))
	}
}

// TestMarkerInEitherTable: a missing v1 table with the marker in v2 means
// v2 authority, never v1.
func TestMarkerInEitherTable(t *testing.T) {
	e := newEnv(t)
	s, _ := e.store(refresh)
	seed(t, s, 9)
	m := e.migrator(&migrate.Options{Retention: new(time.Millisecond), PageSize: 5})
	e.run(m, "dual")
	time.Sleep(2 * refresh)
	e.run(m, "backfill", "verify", "finalize")
	time.Sleep(5 * time.Millisecond)
	if err := m.RetireV1(t.Context(), true); err != nil {
		t.Fatalf("retire-v1: %v", err)
	}
	s2, _ := e.store(refresh)
	items, err := s2.ListAll(t.Context(), "")
	if err != nil || len(items) != 9 {
		t.Fatalf("after deleting v1: %d items, %v", len(items), err)
	}
	if err := s2.Put(t.Context(), "tbl/after", []byte("x")); err != nil {
		t.Fatalf("write after retirement: %v", err)
	}
}

// TestLegacyWriterBlocksFinalize: a v1-only legacy writer's unstamped,
// divergent write is reported by verify and refused by finalize.
func TestLegacyWriterBlocksFinalize(t *testing.T) {
	e := newEnv(t)
	s, _ := e.store(refresh)
	seed(t, s, 10)
	m := e.migrator(nil)
	e.run(m, "dual")
	time.Sleep(2 * refresh)
	e.run(m, "backfill")
	e.legacyPut("tbl/t000", "legacy write")
	rep, err := m.Verify(t.Context())
	if !errors.Is(err, migrate.ErrDifferences) || rep.Different != 1 || rep.Unstamped != 1 || rep.First[0].Key != "tbl/t000" {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	if err := m.Run(t.Context(), "finalize"); !migrate.IsRefused(err) {
		t.Fatalf("finalize with a legacy divergence: %v", err)
	}
}

// TestV1OnlyPeerBlocksBackfillAndFinalize: the node registry gates the
// backfill and finalization.
func TestV1OnlyPeerBlocksBackfillAndFinalize(t *testing.T) {
	e := newEnv(t)
	m := e.migrator(nil)
	e.run(m, "dual")
	_, forced := func() (*metastore.Store, *dynamostore.Driver) {
		d, err := dynamostore.Open(t.Context(), e.api, dynamostore.Options{Table: e.table, Layout: dynamostore.LayoutV1})
		if err != nil {
			t.Fatal(err)
		}
		return metastore.New(d), d
	}()
	if _, err := forced.Registry().Heartbeat(t.Context(), dynamostore.NodeInfo{ID: "old-node", Role: "commit", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * refresh)
	gated := e.migrator(&migrate.Options{GateWait: 3 * refresh, PageSize: 7})
	// The refusal names the peer and its layout (issue 9).
	if err := gated.Run(t.Context(), "backfill"); !migrate.IsRefused(err) || !strings.Contains(err.Error(), "old-node is v1-only") || !strings.Contains(err.Error(), "layout v1") {
		t.Fatalf("backfill with a v1-only peer: %v", err)
	}
	st, err := m.Status(t.Context())
	if err != nil || st.V1Only != 1 || len(st.Peers) != 1 || !st.Peers[0].V1Only || !strings.Contains(st.Hint, "old-node") {
		t.Fatalf("status: %v, v1-only %d, %+v", err, st.V1Only, st)
	}
	// The node leaves; a dual node joins.
	if err := forced.Registry().Deregister(t.Context(), "old-node"); err != nil {
		t.Fatal(err)
	}
	_, d := e.store(refresh)
	if _, err := d.Registry().Heartbeat(t.Context(), dynamostore.NodeInfo{ID: "new-node", Role: "commit", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	e.run(m, "backfill", "verify", "finalize")
}

// TestCrashesResume: killing the migrator at random pages and at every
// step of finalization, then running it again, converges; the cursor never
// skips an unconverged page.
func TestCrashesResume(t *testing.T) {
	e := newEnv(t)
	s, _ := e.store(refresh)
	seed(t, s, 80)
	base := e.migrator(nil)
	e.run(base, "dual")
	time.Sleep(2 * refresh)
	points := []string{"backfill:page-converged", "backfill:cursor-saved"}
	crashes := 0
	for i := 0; ; i++ {
		n := 0
		m := e.migrator(&migrate.Options{PageSize: 7, Crash: func(p string) error {
			if p == points[i%2] {
				n++
				if n == 1+i%3 {
					return errors.New("kill -9")
				}
			}
			return nil
		}})
		err := m.Run(t.Context(), "backfill")
		if err == nil {
			break
		}
		if !errors.Is(err, migrate.ErrCrashed) {
			t.Fatal(err)
		}
		crashes++
		if crashes > 200 {
			t.Fatal("backfill never completes")
		}
	}
	for _, point := range []string{"finalize:barrier-installed", "finalize:reverified"} {
		e.run(base, "verify")
		m := e.migrator(&migrate.Options{PageSize: 7, Crash: func(p string) error {
			if p == point {
				return errors.New("kill -9")
			}
			return nil
		}})
		if err := m.Run(t.Context(), "finalize"); !errors.Is(err, migrate.ErrCrashed) {
			t.Fatalf("finalize with a crash at %s: %v", point, err)
		}
		crashes++
		st, _ := base.Status(t.Context())
		if st.Finalizing == nil || st.Hint == "" {
			t.Fatalf("status after a crash at %s shows no finalization: %+v", point, st)
		}
		if err := s.Put(t.Context(), "tbl/during", []byte("x")); !errors.Is(err, metastore.ErrWritesPaused) {
			t.Fatalf("write while the barrier is held: %v", err)
		}
		if point == "finalize:barrier-installed" {
			e.run(base, "abort-finalize")
			time.Sleep(2 * refresh)
			if err := s.Put(t.Context(), "tbl/after-abort", []byte("x")); err != nil {
				t.Fatalf("write after abort: %v", err)
			}
		}
	}
	e.run(base, "finalize")
	rep, err := base.Verify(t.Context())
	if err != nil || !rep.Clean() || rep.Checked < 81 {
		t.Fatalf("after %d crashes: %v %s", crashes, err, rep.Summary())
	}
	t.Logf("survived %d crashes", crashes)
}

// TestRefusedTransitions: each step refuses what its state forbids.
func TestRefusedTransitions(t *testing.T) {
	e := newEnv(t)
	m := e.migrator(nil)
	for _, step := range []string{"backfill", "verify", "finalize", "abort-finalize", "rollback", "retire-v1"} {
		if err := m.Run(t.Context(), step); !migrate.IsRefused(err) {
			t.Fatalf("%s in state v1: %v", step, err)
		}
	}
	e.run(m, "dual")
	if err := m.Run(t.Context(), "dual"); !migrate.IsRefused(err) {
		t.Fatalf("dual twice: %v", err)
	}
	if err := m.Run(t.Context(), "finalize"); !migrate.IsRefused(err) {
		t.Fatalf("finalize before backfill: %v", err)
	}
	e.run(m, "rollback")
	st, _ := m.Status(t.Context())
	if st.State != dynamostore.StateV1 || st.Epoch != 2 {
		t.Fatalf("after rollback: %s epoch %d", st.State, st.Epoch)
	}
	e.run(m, "dual")
	time.Sleep(2 * refresh)
	e.run(m, "backfill", "verify", "finalize")
	if err := m.Run(t.Context(), "rollback"); !migrate.IsRefused(err) {
		t.Fatalf("rollback after finalization: %v", err)
	}
	if err := m.Run(t.Context(), "retire-v1"); !migrate.IsRefused(err) {
		t.Fatalf("retire-v1 inside the retention horizon: %v", err)
	}
}

// TestForcedLayoutRefusesBypass: a store forced to v1 cannot write once the
// migration has left v1.
func TestForcedLayoutRefusesBypass(t *testing.T) {
	e := newEnv(t)
	d, err := dynamostore.Open(t.Context(), e.api, dynamostore.Options{Table: e.table, Layout: dynamostore.LayoutV1, Refresh: refresh})
	if err != nil {
		t.Fatal(err)
	}
	s := metastore.New(d)
	if err := s.Put(t.Context(), "tbl/a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	e.run(e.migrator(nil), "dual")
	time.Sleep(2 * refresh)
	if err := s.Put(t.Context(), "tbl/a", []byte("2")); !errors.Is(err, metastore.ErrRefused) {
		t.Fatalf("forced v1 write in dual: %v", err)
	}
	if _, err := s.Get(t.Context(), "tbl/a"); err != nil {
		t.Fatalf("forced v1 read in dual: %v", err)
	}
}

// TestCursorExpiresAcrossEpochs: a cursor from before a transition is
// refused as expired, and ListAll restarts its drain.
func TestCursorExpiresAcrossEpochs(t *testing.T) {
	e := newEnv(t)
	s, _ := e.store(refresh)
	seed(t, s, 20)
	page, err := s.List(t.Context(), "tbl/", 3, "")
	if err != nil || page.Cursor == "" {
		t.Fatal(err)
	}
	e.run(e.migrator(nil), "dual")
	time.Sleep(2 * refresh)
	if _, err := s.List(t.Context(), "tbl/", 3, page.Cursor); !errors.Is(err, metastore.ErrCursorExpired) {
		t.Fatalf("cursor across the dual transition: %v", err)
	}
}

func bucketOf(key string) string { return keyspaceBucket(key) }

// TestHeartbeatLiveness: a heartbeating node is live and listed; stopped,
// it leaves the registry; killed (never stopped), it stops counting as
// live once its lease lapses.
func TestHeartbeatLiveness(t *testing.T) {
	e := newEnv(t)
	m := e.migrator(nil)
	_, d := e.store(refresh)
	stop, err := d.Registry().StartHeartbeat(t.Context(), dynamostore.NodeInfo{ID: "n1", Role: "commit", Lease: 2 * time.Second}, 20*time.Millisecond, func(err error) { t.Log(err) })
	if err != nil {
		t.Fatal(err)
	}
	live, v1only, err := m.Peers(t.Context())
	if err != nil || len(live) != 1 || v1only != 1 || live[0].State != dynamostore.StateV1 {
		t.Fatalf("peers in state v1: %+v, v1-only %d, %v", live, v1only, err)
	}
	e.run(m, "dual")
	// The node observes dual at its next beat after its state refresh.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(refresh) {
		live, v1only, _ = m.Peers(t.Context())
		if len(live) == 1 && v1only == 0 && live[0].State == dynamostore.StateDual {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("peers in dual: %+v, v1-only %d", live, v1only)
		}
	}
	if err := stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if live, _, _ := m.Peers(t.Context()); len(live) != 0 {
		t.Fatalf("after stop: %+v", live)
	}
	// A killed node: one heartbeat with a short lease, never renewed.
	if _, err := d.Registry().Heartbeat(t.Context(), dynamostore.NodeInfo{ID: "killed", Role: "commit", Lease: 1500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if live, _, _ := m.Peers(t.Context()); len(live) != 1 {
		t.Fatalf("fresh heartbeat not live: %+v", live)
	}
	time.Sleep(1600 * time.Millisecond)
	if live, _, _ := m.Peers(t.Context()); len(live) != 0 {
		t.Fatalf("lapsed lease still live: %+v", live)
	}
	if _, err := d.Registry().StartHeartbeat(t.Context(), dynamostore.NodeInfo{ID: "x", Lease: time.Millisecond}, time.Second, nil); !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Fatalf("lease shorter than two intervals: %v", err)
	}
}

// rawPutV2 writes a v2 copy behind lake's back.
func (e *env) rawPutV2(key, value string) {
	e.t.Helper()
	_, err := e.api.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(e.table + dynamostore.V2Suffix), Item: map[string]types.AttributeValue{
		"bucket": &types.AttributeValueMemberS{Value: bucketOf(key)},
		"pk":     &types.AttributeValueMemberS{Value: key}, "v": &types.AttributeValueMemberB{Value: []byte(value)}}})
	if err != nil {
		e.t.Fatal(err)
	}
}

// TestFinalizeReverifiesTheChangeLog: under the barrier, finalize compares
// exactly the keys dual writes touched since the verify (the change log),
// and refuses, writes still paused, when one of them differs.
func TestFinalizeReverifiesTheChangeLog(t *testing.T) {
	e := newEnv(t)
	s, d := e.store(refresh)
	seed(t, s, 30)
	base := e.migrator(nil)
	e.run(base, "dual")
	time.Sleep(2 * refresh)
	e.run(base, "backfill", "verify")
	for _, k := range []string{"tbl/t000", "tbl/t003", "tbl/new"} {
		if err := s.Put(t.Context(), k, []byte("after-verify")); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := base.Status(t.Context())
	keys, err := d.Primitives().ChangedKeys(t.Context(), dynamostore.DefaultBarriers, st.Verified.Started)
	if err != nil || len(keys) != 3 {
		t.Fatalf("change log since the verify: %q, %v", keys, err)
	}
	crashing := e.migrator(&migrate.Options{PageSize: 7, Crash: func(p string) error {
		if p == "finalize:barrier-installed" {
			return errors.New("stop")
		}
		return nil
	}})
	if err := crashing.Run(t.Context(), "finalize"); !errors.Is(err, migrate.ErrCrashed) {
		t.Fatalf("finalize: %v", err)
	}
	e.rawPutV2("tbl/t003", "corrupted under the barrier")
	rep, err := base.Finalize(t.Context())
	if !errors.Is(err, migrate.ErrDifferences) || rep.Reverify.Checked != 3 || rep.Reverify.Different != 1 {
		t.Fatalf("finalize over a divergent changed key: %v, %+v", err, rep.Reverify)
	}
	if err := s.Put(t.Context(), "tbl/x", []byte("x")); !errors.Is(err, metastore.ErrWritesPaused) {
		t.Fatalf("writes after a refused finalize: %v", err)
	}
	e.run(base, "abort-finalize")
}

// TestDualAgainAfterRollback: v2 copies left from a rolled-back dual period
// are stale once v1 moves on; entering dual again, writes overwrite them
// instead of failing closed, and the backfill converges the rest.
func TestDualAgainAfterRollback(t *testing.T) {
	e := newEnv(t)
	s, _ := e.store(refresh)
	ctx := t.Context()
	m := e.migrator(nil)
	e.run(m, "dual")
	time.Sleep(2 * refresh)
	for _, k := range []string{"tbl/a", "tbl/b", "tbl/c"} {
		if err := s.Put(ctx, k, []byte("period-1")); err != nil {
			t.Fatal(err)
		}
	}
	e.run(m, "rollback")
	time.Sleep(2 * refresh)
	if err := s.Put(ctx, "tbl/a", []byte("v1-only")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "tbl/b", []byte("period-1")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the new period starts after those copies
	e.run(m, "dual")
	time.Sleep(2 * refresh)
	if err := s.CAS(ctx, "tbl/a", metastore.ExpectValue([]byte("v1-only")), []byte("period-2")); err != nil {
		t.Fatalf("CAS over a stale copy from the rolled-back period: %v", err)
	}
	e.wantBoth("tbl/a", "period-2")
	if err := s.CAS(ctx, "tbl/b", metastore.ExpectAbsent(), []byte("again")); err != nil {
		t.Fatalf("create over a stale copy of a deleted key: %v", err)
	}
	e.wantBoth("tbl/b", "again")
	// A copy written in this period that differs still fails closed.
	e.rawPutV2("tbl/c", "corrupt")
	if err := s.Put(ctx, "tbl/c", []byte("x")); !errors.Is(err, dynamostore.ErrDiverged) {
		t.Fatalf("a divergent copy without lake's stamp: %v", err)
	}
	e.run(m, "backfill", "verify")
}

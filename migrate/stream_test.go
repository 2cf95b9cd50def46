package migrate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/migrate"
)

// legacyUpdate overwrites a v1 value the way a legacy binary may: an
// UpdateItem of the value alone, which keeps whatever stamp lake left.
func (e *env) legacyUpdate(key, value string) {
	e.t.Helper()
	_, err := e.api.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(e.table),
		Key:              map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}},
		UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberB{Value: []byte(value)}}})
	if err != nil {
		e.t.Fatal(err)
	}
}

// skewedMigrator is a migrator whose clock runs ahead of the writers' by
// more than migrate.ClockSkew: every v2 copy is then older than any skew
// window, which no filter on write times can reach back to.
func (e *env) skewedMigrator() *migrate.Migrator {
	settle := 300 * time.Millisecond
	return e.migrator(&migrate.Options{PageSize: 7, Settle: &settle,
		Now: func() time.Time { return time.Now().Add(3 * migrate.ClockSkew) }})
}

// TestLegacyWritesAfterVerifyCaughtByStream (issue 10): after a clean
// verify, a raw SDK client overwrites a key (UpdateItem, keeping lake's
// stamp), creates one, and deletes two whose v2 copies are older than any
// skew window. finalize refuses naming all four without pausing writes;
// repair converges them; finalize succeeds; no deleted key comes back and
// every legacy value is served from v2.
func TestLegacyWritesAfterVerifyCaughtByStream(t *testing.T) {
	e := newEnv(t)
	s, d := e.store(refresh)
	ctx := t.Context()
	seedN(t, s, 20)
	m := e.skewedMigrator()
	e.run(m, "dual")
	time.Sleep(2 * refresh)
	e.run(m, "backfill")
	if rep, err := m.Verify(ctx); err != nil || !rep.Recorded {
		t.Fatalf("verify: %v (%s)", err, rep.Summary())
	}
	snap, err := d.Primitives().ReadMigration(ctx)
	if err != nil || snap.Capture == nil || snap.Verified == nil || snap.Verified.Stream == nil || len(snap.Verified.Stream.Shards) == 0 {
		t.Fatalf("dual should record the capture and verify the stream position: %+v, %v", snap.Migration, err)
	}
	if st, err := m.Status(ctx); err != nil || st.Capture == nil || !strings.Contains(st.Hint, "24 hours") {
		t.Fatalf("status should show the stream and when finalize must run by: %+v, %v", st, err)
	}

	e.legacyUpdate("tbl/k005", "legacy-overwrite")
	e.legacyPut("tbl/legacy-new", "legacy-created")
	e.legacyDelete("tbl/k003")
	e.legacyDelete("tbl/k011")
	_, err = m.Finalize(ctx)
	if !errors.Is(err, migrate.ErrDifferences) {
		t.Fatalf("finalize after legacy writes: %v", err)
	}
	for _, k := range []string{`"tbl/k005"`, `"tbl/legacy-new"`, `"tbl/k003"`, `"tbl/k011"`} {
		if !strings.Contains(err.Error(), k) {
			t.Fatalf("finalize's refusal does not name %s: %v", k, err)
		}
	}
	if !strings.Contains(err.Error(), "writes were not paused") {
		t.Fatalf("the refusal should come from the online precheck: %v", err)
	}
	if err := s.Put(ctx, "tbl/k007", []byte("still writable")); err != nil {
		t.Fatalf("a write after the refusal: %v", err)
	}
	res, err := m.Repair(ctx)
	if err != nil || res.Repaired != 1 || res.Created != 1 || res.Removed != 2 {
		t.Fatalf("repair: %+v, %v", res, err)
	}
	rep, err := m.Finalize(ctx)
	if err != nil {
		t.Fatalf("finalize after repair: %v", err)
	}
	if rep.Precheck.Checked < 5 || rep.Records < 5 {
		t.Fatalf("finalize should re-check the changed keys: precheck %d keys, %d stream records", rep.Precheck.Checked, rep.Records)
	}
	time.Sleep(2 * refresh)
	for k, want := range map[string]string{"tbl/k005": "legacy-overwrite", "tbl/legacy-new": "legacy-created", "tbl/k007": "still writable", "tbl/k004": "v4"} {
		if v, ok := e.raw(true, k); !ok || v != want {
			t.Fatalf("v2 copy of %s = %q (%v), want %q", k, v, ok, want)
		}
		if got, err := s.Get(ctx, k); err != nil || string(got) != want {
			t.Fatalf("get %s after finalize = %q, %v; want %q", k, got, err, want)
		}
	}
	for _, k := range []string{"tbl/k003", "tbl/k011"} {
		if _, err := s.Get(ctx, k); !errors.Is(err, metastore.ErrNotFound) {
			t.Fatalf("the legacy-deleted key %s came back: %v", k, err)
		}
	}
	items, err := s.ListAll(ctx, "tbl/")
	if err != nil || len(items) != 19 {
		t.Fatalf("list after finalize: %d items, %v; want 19", len(items), err)
	}
}

// TestFinalizeRefusesWhatTheStreamCannotProve: the v1 table's stream is
// replaced after the verify (disabled and enabled again: a new stream, so
// the verify's positions mean nothing in it). A legacy delete in between
// would be invisible, so finalize refuses, without pausing writes, naming
// the commands that make it provable; a fresh verify marks the new stream
// and finalize succeeds; --full-reverify also proves it, by full scans.
func TestFinalizeRefusesWhatTheStreamCannotProve(t *testing.T) {
	for _, full := range []bool{false, true} {
		e := newEnv(t)
		s, d := e.store(refresh)
		ctx := t.Context()
		seedN(t, s, 10)
		m := e.skewedMigrator()
		e.run(m, "dual")
		time.Sleep(2 * refresh)
		e.run(m, "backfill", "verify")
		for _, spec := range []types.StreamSpecification{{StreamEnabled: aws.Bool(false)}, {StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeKeysOnly}} {
			if _, err := e.api.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(e.table), StreamSpecification: &spec}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := m.Finalize(ctx)
		if !errors.Is(err, migrate.ErrUnprovable) || !migrate.IsRefused(err) || !strings.Contains(err.Error(), "replaced") ||
			!strings.Contains(err.Error(), "lake dynamo-migrate verify") || !strings.Contains(err.Error(), "--full-reverify") {
			t.Fatalf("finalize over a replaced stream: %v", err)
		}
		if snap, err := d.Primitives().ReadMigration(ctx); err != nil || snap.FinalizingSince != nil {
			t.Fatalf("the refusal paused writes: %+v, %v", snap.FinalizingSince, err)
		}
		e.legacyDelete("tbl/k002")
		if full {
			fm := e.migrator(&migrate.Options{PageSize: 7, FullReverify: true})
			if _, err := fm.Finalize(ctx); !errors.Is(err, migrate.ErrDifferences) || !strings.Contains(err.Error(), `"tbl/k002"`) {
				t.Fatalf("finalize --full-reverify after a legacy delete: %v", err)
			}
			if _, err := fm.Repair(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := fm.Finalize(ctx); err != nil {
				t.Fatalf("finalize --full-reverify after repair: %v", err)
			}
		} else {
			if _, err := m.Verify(ctx); !errors.Is(err, migrate.ErrDifferences) {
				t.Fatalf("a fresh verify after a legacy delete: %v", err)
			}
			if _, err := m.Repair(ctx); err != nil {
				t.Fatal(err)
			}
			if rep, err := m.Verify(ctx); err != nil || !rep.Recorded {
				t.Fatalf("verify after repair: %v", err)
			}
			if _, err := m.Finalize(ctx); err != nil {
				t.Fatalf("finalize after a fresh verify: %v", err)
			}
		}
		time.Sleep(2 * refresh)
		if _, err := s.Get(ctx, "tbl/k002"); !errors.Is(err, metastore.ErrNotFound) {
			t.Fatalf("full=%v: the legacy-deleted key came back: %v", full, err)
		}
	}
}

// TestLegacyDeleteBeforeTheBarrierCaughtUnderIt: a legacy delete lands
// after finalize's online precheck and before its barrier. The re-check
// under the barrier, after the settle delay, reads the stream on from
// where the precheck stopped and refuses with writes paused; repair runs
// under the barrier; finalize resumes and publishes; the key stays deleted.
func TestLegacyDeleteBeforeTheBarrierCaughtUnderIt(t *testing.T) {
	e := newEnv(t)
	s, _ := e.store(refresh)
	ctx := t.Context()
	seedN(t, s, 10)
	settle := 300 * time.Millisecond
	deleted := false
	m := e.migrator(&migrate.Options{PageSize: 7, Settle: &settle,
		Now: func() time.Time { return time.Now().Add(3 * migrate.ClockSkew) },
		Crash: func(p string) error {
			if p == "finalize:prechecked" && !deleted {
				deleted = true
				e.legacyDelete("tbl/k006")
			}
			return nil
		}})
	e.run(m, "dual")
	time.Sleep(2 * refresh)
	e.run(m, "backfill", "verify")
	_, err := m.Finalize(ctx)
	if !errors.Is(err, migrate.ErrDifferences) || !strings.Contains(err.Error(), `"tbl/k006"`) || !strings.Contains(err.Error(), "writes stay paused") {
		t.Fatalf("finalize with a legacy delete between precheck and barrier: %v", err)
	}
	if err := s.Put(ctx, "tbl/k001", []byte("x")); !errors.Is(err, metastore.ErrWritesPaused) {
		t.Fatalf("a write while the barrier is held: %v", err)
	}
	if _, err := m.Repair(ctx); err != nil {
		t.Fatalf("repair under the barrier: %v", err)
	}
	if _, err := m.Finalize(ctx); err != nil {
		t.Fatalf("finalize resumed after repair: %v", err)
	}
	time.Sleep(2 * refresh)
	if _, err := s.Get(ctx, "tbl/k006"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("the legacy-deleted key came back: %v", err)
	}
}

package migrate_test

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
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/migrate"
)

// legacyDelete deletes a v1 item the way a legacy binary does: a plain
// DeleteItem through the SDK.
func (e *env) legacyDelete(key string) {
	e.t.Helper()
	_, err := e.api.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(e.table),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}}})
	if err != nil {
		e.t.Fatal(err)
	}
}

// seedN writes n keys tbl/k000.. through s.
func seedN(t *testing.T, s *metastore.Store, n int) {
	t.Helper()
	for i := range n {
		if err := s.Put(t.Context(), fmt.Sprintf("tbl/k%03d", i), []byte(fmt.Sprintf("v%d", i))); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLegacyWriterRepairedWithoutRollback (issue 9): a legacy writer (the raw
// SDK on v1) deletes a key after the backfill; verify reports it; then the
// writer overwrites a key and creates one. A dual write to the diverged key
// fails closed naming the repair command; repair converges what verify
// named, a second verify names the rest, repair again: verify is clean,
// finalize succeeds, every legacy value is served from v2 and the deleted
// key stays deleted. No rollback.
func TestLegacyWriterRepairedWithoutRollback(t *testing.T) {
	e := newEnv(t)
	s, _ := e.store(refresh)
	ctx := t.Context()
	seedN(t, s, 20)
	m := e.migrator(nil)
	e.run(m, "dual")
	time.Sleep(2 * refresh)
	e.run(m, "backfill", "verify")

	e.legacyDelete("tbl/k003")
	rep, err := m.Verify(ctx)
	if !errors.Is(err, migrate.ErrDifferences) || rep.ExtraInV2 != 1 || !strings.Contains(err.Error(), `"tbl/k003"`) {
		t.Fatalf("verify after a legacy delete: %v (%s)", err, rep.Summary())
	}
	if rep.Checked != 20 {
		t.Fatalf("verify checked %d keys, want 20 (19 in v1, 1 only in v2)", rep.Checked)
	}
	// A dual write to the deleted key would re-create the record over a
	// diverged copy: it fails closed and names the repair.
	if err := s.Put(ctx, "tbl/k003", []byte("x")); !errors.Is(err, dynamostore.ErrDiverged) || !strings.Contains(err.Error(), "lake dynamo-migrate repair") {
		t.Fatalf("dual put over a deleted key's leftover copy: %v", err)
	}
	if _, err := m.Finalize(ctx); !migrate.IsRefused(err) || !strings.Contains(err.Error(), `"tbl/k003"`) || !strings.Contains(err.Error(), "repair") {
		t.Fatalf("finalize with a recorded difference: %v", err)
	}

	e.legacyPut("tbl/k005", "legacy-overwrite")
	e.legacyPut("tbl/legacy-new", "legacy-created")
	res, err := m.Repair(ctx)
	if err != nil || res.Removed != 1 {
		t.Fatalf("repair: %+v, %v", res, err)
	}
	e.wantNeither("tbl/k003")
	rep, err = m.Verify(ctx)
	if !errors.Is(err, migrate.ErrDifferences) || rep.Different != 1 || rep.MissingInV2 != 1 || rep.Unstamped != 2 {
		t.Fatalf("verify after the overwrite and the create: %v (%s)", err, rep.Summary())
	}
	for _, k := range []string{`"tbl/k005"`, `"tbl/legacy-new"`} {
		if !strings.Contains(err.Error(), k) {
			t.Fatalf("verify's error does not name %s: %v", k, err)
		}
	}
	if res, err := m.Repair(ctx); err != nil || res.Repaired != 1 || res.Created != 1 {
		t.Fatalf("second repair: %+v, %v", res, err)
	}
	if err := m.Run(ctx, "repair"); !migrate.IsRefused(err) {
		t.Fatalf("repair with nothing recorded: %v", err)
	}
	if rep, err := m.Verify(ctx); err != nil || !rep.Recorded {
		t.Fatalf("verify after repair: %v (%s)", err, rep.Summary())
	}
	if _, err := m.Finalize(ctx); err != nil {
		t.Fatalf("finalize after repair: %v", err)
	}
	time.Sleep(2 * refresh)
	for k, want := range map[string]string{"tbl/k005": "legacy-overwrite", "tbl/legacy-new": "legacy-created", "tbl/k004": "v4"} {
		if v, ok := e.raw(true, k); !ok || v != want {
			t.Fatalf("v2 copy of %s = %q (%v), want %q", k, v, ok, want)
		}
		if got, err := s.Get(ctx, k); err != nil || string(got) != want {
			t.Fatalf("get %s after finalize = %q, %v; want %q", k, got, err, want)
		}
	}
	if _, err := s.Get(ctx, "tbl/k003"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("the legacy-deleted key came back: %v", err)
	}
	items, err := s.ListAll(ctx, "tbl/")
	if err != nil || len(items) != 20 {
		t.Fatalf("list after finalize: %d items, %v", len(items), err)
	}
}

// TestBackfillAgainVisitsBothTables: after the backfill, a legacy writer
// deletes, overwrites and creates keys; a full re-pass converges all of
// them, removing the v2 copy of the deleted key only because v1 still lacks
// it, and clears the recorded differences, so verify and finalize pass.
func TestBackfillAgainVisitsBothTables(t *testing.T) {
	e := newEnv(t)
	s, _ := e.store(refresh)
	ctx := t.Context()
	seedN(t, s, 30)
	m := e.migrator(nil)
	e.run(m, "dual")
	time.Sleep(2 * refresh)
	e.run(m, "backfill", "verify")
	e.legacyDelete("tbl/k001")
	e.legacyDelete("tbl/k029")
	e.legacyPut("tbl/k010", "over")
	e.legacyPut("tbl/new", "created")
	if _, err := m.Verify(ctx); !errors.Is(err, migrate.ErrDifferences) {
		t.Fatalf("verify: %v", err)
	}
	// A crash mid-pass resumes from the durable cursor.
	crashing := e.migrator(&migrate.Options{PageSize: 7, Crash: func(p string) error {
		if p == "again:page-converged" {
			return errors.New("kill -9")
		}
		return nil
	}})
	if _, err := crashing.BackfillAgain(ctx); !errors.Is(err, migrate.ErrCrashed) {
		t.Fatalf("re-pass with a crash: %v", err)
	}
	a, err := m.BackfillAgain(ctx)
	if err != nil || !a.Done || a.Removed != 2 || a.Repaired != 1 || a.Created != 1 {
		t.Fatalf("backfill --again: %+v, %v", a, err)
	}
	st, err := m.Status(ctx)
	if err != nil || st.Diverged != nil {
		t.Fatalf("status after the re-pass still records differences: %+v, %v", st.Diverged, err)
	}
	e.wantNeither("tbl/k001")
	e.wantNeither("tbl/k029")
	e.wantBoth("tbl/k010", "over")
	e.wantBoth("tbl/new", "created")
	e.run(m, "verify", "finalize")
}

// TestRepassNeverRemovesWhatV1Holds: a v2 copy is removed only while v1
// lacks the key; a key v1 has again (re-created between the scan and the
// removal) keeps its copy, converged to v1.
func TestRepassNeverRemovesWhatV1Holds(t *testing.T) {
	e := newEnv(t)
	s, d := e.store(refresh)
	ctx := t.Context()
	seedN(t, s, 5)
	m := e.migrator(nil)
	e.run(m, "dual")
	time.Sleep(2 * refresh)
	e.run(m, "backfill")
	e.legacyDelete("tbl/k002")
	e.legacyPut("tbl/k002", "back")
	if _, err := d.Primitives().RepassV2Page(ctx, "", 100); err != nil {
		t.Fatal(err)
	}
	v2, ok := e.raw(true, "tbl/k002")
	if !ok || v2 != "v2" {
		t.Fatalf("the v2 pass touched a key v1 holds: %q %v", v2, ok)
	}
	if res, err := d.Primitives().ConvergeKeys(ctx, []string{"tbl/k002"}); err != nil || res.Repaired != 1 {
		t.Fatalf("converge: %+v %v", res, err)
	}
	e.wantBoth("tbl/k002", "back")
}

// TestV1DeletedAfterFinalization (issue 9): with the marker published, the
// v1 table deleted through the raw SDK leaves every operation working from
// v2, status says v1 is missing, and retire-v1 records v2-only at once.
func TestV1DeletedAfterFinalization(t *testing.T) {
	e := newEnv(t)
	s, _ := e.store(refresh)
	ctx := t.Context()
	seedN(t, s, 10)
	m := e.migrator(nil)
	e.run(m, "dual")
	time.Sleep(2 * refresh)
	e.run(m, "backfill", "verify", "finalize")
	if _, err := e.api.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(e.table)}); err != nil {
		t.Fatal(err)
	}
	// The running store notices within its refresh; a fresh one at once.
	fresh, _ := e.store(refresh)
	for _, st := range []*metastore.Store{s, fresh} {
		if v, err := st.Get(ctx, "tbl/k001"); err != nil || string(v) != "v1" {
			t.Fatalf("get with v1 gone: %q %v", v, err)
		}
		if err := st.Put(ctx, "tbl/k002", []byte("after")); err != nil {
			t.Fatalf("put with v1 gone: %v", err)
		}
		if err := st.CAS(ctx, "tbl/k002", metastore.ExpectValue([]byte("after")), []byte("cas")); err != nil {
			t.Fatalf("cas with v1 gone: %v", err)
		}
		if err := st.CAS(ctx, "tbl/k002", metastore.ExpectValue([]byte("cas")), []byte("after")); err != nil {
			t.Fatalf("cas back with v1 gone: %v", err)
		}
		if items, err := st.ListAll(ctx, "tbl/"); err != nil || len(items) != 10 {
			t.Fatalf("list with v1 gone: %d, %v", len(items), err)
		}
	}
	if err := fresh.Delete(ctx, "tbl/k009", []byte("v9")); err != nil {
		t.Fatalf("delete with v1 gone: %v", err)
	}
	st, err := m.Status(ctx)
	if err != nil || st.V1Table || !strings.Contains(st.Hint, "missing") {
		t.Fatalf("status with v1 gone: %+v, %v", st, err)
	}
	if err := m.RetireV1(ctx, true); err != nil {
		t.Fatalf("retire-v1 with v1 gone: %v", err)
	}
	st, err = m.Status(ctx)
	if err != nil || st.State != dynamostore.StateV2Only || !strings.Contains(st.Hint, "complete") {
		t.Fatalf("status after retire-v1: %+v, %v", st, err)
	}
	if err := fresh.Put(ctx, "tbl/last", []byte("x")); err != nil {
		t.Fatalf("put in v2-only: %v", err)
	}
}

// TestRetentionZeroAndV2OnlyDelete: --retention 0 is honoured (retire-v1
// right after finalize), status offers retire-v1 with its time while the
// horizon holds, and in v2-only retire-v1 --delete-table deletes v1.
func TestRetentionZeroAndV2OnlyDelete(t *testing.T) {
	e := newEnv(t)
	s, _ := e.store(refresh)
	seedN(t, s, 3)
	m := e.migrator(nil)
	e.run(m, "dual")
	time.Sleep(2 * refresh)
	e.run(m, "backfill", "verify", "finalize")
	st, err := m.Status(t.Context())
	if err != nil || st.RetireAt == nil || !strings.Contains(st.Hint, st.RetireAt.Format(time.RFC3339)) {
		t.Fatalf("status under the default retention: %+v %v", st, err)
	}
	for _, a := range st.Allowed {
		if a == "retire-v1" {
			t.Fatalf("retire-v1 offered before the horizon: %v", st.Allowed)
		}
	}
	if err := m.Run(t.Context(), "retire-v1"); !migrate.IsRefused(err) || !strings.Contains(err.Error(), "allowed from") {
		t.Fatalf("retire-v1 before the horizon: %v", err)
	}
	_, d := e.store(refresh)
	if _, err := migrate.New(d, &migrate.Options{Retention: new(-time.Second)}); !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Fatal("a negative retention was accepted")
	}
	now := e.migrator(&migrate.Options{Retention: new(time.Duration(0))})
	if err := now.RetireV1(t.Context(), false); err != nil {
		t.Fatalf("retire-v1 with --retention 0: %v", err)
	}
	st, _ = now.Status(t.Context())
	if !st.V1Table || !strings.Contains(st.Hint, "--delete-table") {
		t.Fatalf("v2-only status with v1 still there: %+v", st)
	}
	if err := now.RetireV1(t.Context(), true); err != nil {
		t.Fatalf("retire-v1 --delete-table in v2-only: %v", err)
	}
	if _, err := e.api.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(e.table)}); err == nil {
		t.Fatal("the v1 table still exists")
	}
}

// TestChangeLogLongKeys: a key of the maximum length written in dual mode
// (which the change log's time-first sort key could not hold verbatim)
// is written, and the change log still returns it exactly; two long keys
// that share their first kilobyte keep two entries.
func TestChangeLogLongKeys(t *testing.T) {
	e := newEnv(t)
	s, d := e.store(refresh)
	m := e.migrator(nil)
	e.run(m, "dual")
	time.Sleep(2 * refresh)
	since := time.Now().Add(-time.Second)
	long := "tbl/" + strings.Repeat("k", metastore.MaxKeyBytes-5)
	keys := []string{long + "a", long + "b", "tbl/short"}
	for _, k := range keys {
		if err := s.Put(t.Context(), k, []byte("v")); err != nil {
			t.Fatalf("dual put of a %d-byte key: %v", len(k), err)
		}
	}
	got, err := d.Primitives().ChangedKeys(t.Context(), dynamostore.DefaultBarriers, since)
	if err != nil || len(got) != 3 {
		t.Fatalf("change log: %d keys, %v", len(got), err)
	}
	for _, k := range keys {
		found := false
		for _, g := range got {
			found = found || g == k
		}
		if !found {
			t.Fatalf("the change log lost the %d-byte key %.20q…", len(k), k)
		}
	}
}

// TestStatusOfStandaloneV2: a v2 table made by `lake init` with layout v2
// (no v1 table, no migration) is described as such, and every step is
// refused.
func TestStatusOfStandaloneV2(t *testing.T) {
	api := ddb.NewClient(ddblocal.Config(t), "")
	opts := ddblocal.Tables(t, api, dynamostore.Options{Layout: dynamostore.LayoutV2})
	d, err := dynamostore.Open(t.Context(), api, dynamostore.Options{Table: opts.Table})
	if err != nil {
		t.Fatal(err)
	}
	m, err := migrate.New(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := m.Status(t.Context())
	if err != nil || !st.Standalone || st.V1Table || !strings.Contains(st.Hint, "standalone") || len(st.Allowed) != 0 || st.Peers == nil {
		t.Fatalf("status of a standalone v2 table: %+v, %v", st, err)
	}
	if err := m.Run(t.Context(), "retire-v1"); !migrate.IsRefused(err) || !strings.Contains(err.Error(), "standalone") {
		t.Fatalf("retire-v1 on a standalone v2 table: %v", err)
	}
}

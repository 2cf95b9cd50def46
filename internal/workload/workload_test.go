package workload_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lakemeta/lake/backend/boltstore"
	"github.com/lakemeta/lake/backend/dynamostore"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultproxy"
	"github.com/lakemeta/lake/internal/lincheck"
	"github.com/lakemeta/lake/internal/workload"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/migrate"
)

// artifacts is where failing histories and their visualisations go.
func artifacts(t *testing.T) string {
	if d := os.Getenv("LAKE_ARTIFACTS"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "lake-lincheck")
}

// TestLinearizableAcrossMigration: 8 clients × 250 random operations per
// seed, with faults on the wire, while the migration walks from v1 to
// v2-authoritative with client restarts; the history must be linearizable.
func TestLinearizableAcrossMigration(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			res := RunMigrationWorkload(t, seed, 8, 250, 0.06)
			if res.Verdict != porcupine.Ok {
				t.Fatalf("history is %s: see %s and %s", res.Verdict, res.Visualization, res.History)
			}
		})
	}
}

// RunMigrationWorkload runs one checked workload across the migration.
func RunMigrationWorkload(t *testing.T, seed uint64, clients, ops int, faultRate float64) lincheck.Result {
	cfg := ddblocal.Config(t)
	direct := dynamostore.NewClient(cfg, "")
	table := ddblocal.TableName(t)
	if err := dynamostore.Create(context.Background(), direct, dynamostore.Options{Table: table}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range []string{table, table + dynamostore.V2Suffix} {
			direct.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		}
	})
	p, err := faultproxy.Start(ddblocal.Endpoint(t), seed)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rates := map[faultproxy.Fault]float64{}
	for _, f := range faultproxy.All {
		rates[f] = faultRate / float64(len(faultproxy.All))
	}
	p.SetRates(rates)
	api := dynamostore.NewClient(cfg, p.URL)
	const refresh = 100 * time.Millisecond
	retryer := dynamostore.NewRetryer(dynamostore.RetryOptions{MaxAttempts: 10, BaseDelay: 2 * time.Millisecond, MaxDelay: 50 * time.Millisecond})
	opts := dynamostore.Options{Table: table, Refresh: refresh, Retryer: retryer}
	open := func(ctx context.Context, _ int) (*metastore.Store, error) {
		var d *dynamostore.Driver
		var err error
		for range 10 { // opening goes through the faulty wire too
			if d, err = dynamostore.Open(ctx, api, opts); err == nil {
				return metastore.New(d), nil
			}
		}
		return nil, err
	}
	md, err := dynamostore.Open(context.Background(), api, opts)
	if err != nil {
		t.Fatal(err)
	}
	m, err := migrate.New(md, &migrate.Options{Refresh: refresh, PageSize: 25})
	if err != nil {
		t.Fatal(err)
	}
	step := func(name string) func(context.Context) error {
		return func(ctx context.Context) error { return m.Run(ctx, name) }
	}
	phases := []workload.Phase{
		{Name: "dual", Run: step("dual"), Restart: true},
		{Name: "backfill", Run: step("backfill")},
		{Name: "verify", Run: step("verify")},
		{Name: "finalize", Run: step("finalize"), Restart: true},
	}
	rec := lincheck.NewRecorder()
	wcfg := workload.Config{Clients: clients, OpsPerClient: ops, Groups: 4, KeysPerGroup: 3, Seed: seed}
	st, err := workload.Run(context.Background(), wcfg, open, phases, rec)
	if err != nil {
		t.Fatal(err)
	}
	final, err := m.Status(context.Background())
	if err != nil || final.State != dynamostore.StateV2Auth {
		t.Fatalf("the migration did not finish: %v %s", err, final.State)
	}
	res, err := lincheck.Check(rec.Operations(), 2*time.Minute, artifacts(t), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	injected, requests := p.Injected()
	t.Logf("seed %d: %d ops (%d unknown, %d no-effect: %d paused, %d diverged; %d conflicts), %d restarts, %d phase retries; %d requests, faults %v; verdict %s",
		seed, st.Ops, st.Unknown, st.NoEffect, st.Paused, st.Diverged, st.Conflicts, st.Restarts, st.PhaseErrors, requests, injected, res.Verdict)
	return res
}

// brokenCAS is a deliberately broken store: CAS as a read, a pause and an
// unconditional write, not atomic. The checker must catch it.
type brokenCAS struct{ *boltstore.Driver }

func (b brokenCAS) CAS(ctx context.Context, key string, expect metastore.Expect, value []byte) error {
	cur, err := b.Driver.Get(ctx, key)
	exists := err == nil
	if err != nil && !isNotFound(err) {
		return err
	}
	if !expect.Matches(exists, cur) {
		return metastore.Conflict(key, "broken")
	}
	time.Sleep(time.Millisecond)
	return b.Driver.Put(ctx, key, value)
}

func isNotFound(err error) bool { return err != nil && errorsIs(err, metastore.ErrNotFound) }

// TestCheckerCatchesBrokenCAS is the negative control: the same workload
// on a store whose CAS is not atomic is found not linearizable.
func TestCheckerCatchesBrokenCAS(t *testing.T) {
	d, err := boltstore.Open(filepath.Join(t.TempDir(), "lake.db"), &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s := metastore.New(brokenCAS{d})
	defer s.Close()
	open := func(context.Context, int) (*metastore.Store, error) { return s, nil }
	rec := lincheck.NewRecorder()
	cfg := workload.Config{Clients: 8, OpsPerClient: 200, Groups: 1, KeysPerGroup: 2, Seed: 9}
	if _, err := workload.Run(context.Background(), cfg, noClose(open), nil, rec); err != nil {
		t.Fatal(err)
	}
	res, err := lincheck.Check(rec.Operations(), time.Minute, t.TempDir(), "broken")
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != porcupine.Illegal {
		t.Fatalf("a non-atomic CAS passed the checker: %s", res.Verdict)
	}
}

// noClose shares one store between clients: closing it is the test's job.
func noClose(open workload.Opener) workload.Opener {
	return func(ctx context.Context, c int) (*metastore.Store, error) {
		s, err := open(ctx, c)
		if err != nil {
			return nil, err
		}
		return metastore.New(unclosable{s.Driver()}), nil
	}
}

type unclosable struct{ metastore.Driver }

func (unclosable) Close() error { return nil }

package workload_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/lincheck"
	"github.com/lakemeta/lake/internal/workload"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/lakemeta/lake/metastore/dynamostore"
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
	rep, err := workload.RunMigration(context.Background(), workload.MigrationRun{
		AWS: ddblocal.Config(t), Endpoint: ddblocal.Endpoint(t), Table: ddblocal.TableName(t),
		Seed: seed, Clients: clients, Ops: ops, FaultRate: faultRate, OutDir: artifacts(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Final != dynamostore.StateV2Auth {
		t.Fatalf("the migration did not finish: %s", rep.Final)
	}
	t.Logf("seed %d: %s", seed, rep.Summary())
	return rep.Check
}

// TestLinearizableWithUnknownOutcomes: with two attempts per operation and
// a 30% fault rate, many operations end with an unknown outcome (the
// response was lost, or the retries ran out); the history must still be
// linearizable, each unknown operation taking effect once or not at all.
func TestLinearizableWithUnknownOutcomes(t *testing.T) {
	rep, err := workload.RunMigration(context.Background(), workload.MigrationRun{
		AWS: ddblocal.Config(t), Endpoint: ddblocal.Endpoint(t), Table: ddblocal.TableName(t),
		Seed: 21, Clients: 6, Ops: 50, FaultRate: 0.3, Attempts: 2, OutDir: artifacts(t),
		// Unknown outcomes widen the checker's search: a loaded CI machine
		// needed more than two minutes for 480 operations (a minute idle).
		CheckTimeout: 5 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("unknown outcomes: %s", rep.Summary())
	if rep.Stats.Unknown == 0 {
		t.Fatal("no operation had an unknown outcome: the run tests nothing new")
	}
	if rep.Check.Verdict != porcupine.Ok {
		t.Fatalf("verdict %s (%s, %s)", rep.Check.Verdict, rep.Check.Visualization, rep.Check.History)
	}
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

// TestLinearizableThroughNodes: the same checked workload with the clients
// going through two lake serve nodes, restarted at dual and at finalize.
func TestLinearizableThroughNodes(t *testing.T) {
	rep, err := workload.RunMigration(context.Background(), workload.MigrationRun{
		AWS: ddblocal.Config(t), Endpoint: ddblocal.Endpoint(t), Table: ddblocal.TableName(t),
		Seed: 11, Clients: 8, Ops: 150, FaultRate: 0.06, OutDir: artifacts(t), Nodes: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("through nodes: %s", rep.Summary())
	if rep.Final != dynamostore.StateV2Auth || rep.Check.Verdict != porcupine.Ok {
		t.Fatalf("final state %s, verdict %s (%s, %s)", rep.Final, rep.Check.Verdict, rep.Check.Visualization, rep.Check.History)
	}
}

package migrate_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/migrate"
)

// TestBackfillSweep: a dry run writes nothing and says what it would do; a
// backfill stopped after a few saved cursors resumes with the segment count
// it recorded, whatever the rerun asks for, and converges.
func TestBackfillSweep(t *testing.T) {
	e := newEnv(t)
	s, _ := e.store(refresh)
	seed(t, s, 60)
	base := e.migrator(nil)
	e.run(base, "dual")
	time.Sleep(2 * refresh)

	var out bytes.Buffer
	dry := e.migrator(&migrate.Options{PageSize: 7, Segments: 3, DryRun: true, Progress: &out})
	e.run(dry, "backfill")
	if !strings.Contains(out.String(), "scanned 60: would create 60, would repair 0, already equal 0 (nothing written)") {
		t.Fatalf("dry run said:\n%s", out.String())
	}
	if _, ok := e.raw(true, "tbl/t000"); ok {
		t.Fatal("the dry run wrote into v2")
	}
	st, err := base.Status(t.Context())
	if err != nil || st.State != dynamostore.StateDual {
		t.Fatalf("after a dry run: state %s, %v; want dual (a dry run does not enter backfill)", st.State, err)
	}

	saves := 0
	crashing := e.migrator(&migrate.Options{PageSize: 7, Segments: 3, Crash: func(p string) error {
		if p == "backfill:cursor-saved" {
			if saves++; saves == 3 {
				return errors.New("kill -9")
			}
		}
		return nil
	}})
	if err := crashing.Run(t.Context(), "backfill"); !errors.Is(err, migrate.ErrCrashed) {
		t.Fatalf("backfill with a crash: %v", err)
	}
	out.Reset()
	e.run(e.migrator(&migrate.Options{PageSize: 7, Segments: 5, Progress: &out}), "backfill")
	if !strings.Contains(out.String(), "resumed the backfill from its saved cursors (3 segments, as recorded)") {
		t.Fatalf("the rerun did not resume with the recorded count:\n%s", out.String())
	}
	if st, err = base.Status(t.Context()); err != nil || !st.Backfill.Done || st.Backfill.Segments != 3 {
		t.Fatalf("after the resumed backfill: %v, %+v", err, st.Backfill)
	}
	rep, err := base.Verify(t.Context())
	if err != nil || !rep.Clean() || rep.Checked != 60 {
		t.Fatalf("verify after the resumed backfill: %v %s", err, rep.Summary())
	}
	e.wantBoth("tbl/t000", "v:tbl/t000")
}

// TestBackfillRefusesNegativeRate: a negative --max-wcu is refused up front.
func TestBackfillRefusesNegativeRate(t *testing.T) {
	_, d := newEnv(t).store(refresh)
	if _, err := migrate.New(d, &migrate.Options{MaxWCU: -1}); !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Fatalf("negative max WCU: %v", err)
	}
}

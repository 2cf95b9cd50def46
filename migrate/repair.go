package migrate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lakemeta/lake/metastore/dynamostore"
)

// A writer lake does not know (a legacy binary writing v1 directly) can
// change v1 after the backfill's cursor moved past a key. verify and a
// refused finalize record the keys they found different (Migration.Diverged)
// and finalize is refused while any are recorded. Two repairs converge v2 to
// v1 without a rollback, under the backfill's two-sided conditions:
//
//   - repair converges exactly the recorded keys;
//   - backfill --again re-passes both tables: every v1 key, then every v2
//     copy whose key v1 lacks (removed only while v1 still lacks it).

func checkRepair(s dynamostore.MigrationSnapshot) error {
	switch {
	case s.State != dynamostore.StateDual && s.State != dynamostore.StateBackfill:
		return refused("repair converges v2 to v1 in state dual or backfill; the table is in state %s", s.State)
	case s.Diverged == nil && !s.Backfill.Done:
		return refused("the backfill is not complete: run `lake dynamo-migrate backfill` (it resumes, and converges every v1 key)")
	case s.Diverged == nil:
		return refused("no differences are recorded; run `lake dynamo-migrate verify` to find them (or `lake dynamo-migrate backfill --again` for a full re-pass)")
	case len(s.Diverged.Keys) == 0:
		return refused("%d differing keys were found beyond what is recorded; run `lake dynamo-migrate backfill --again`", s.Diverged.More)
	}
	return nil
}

func (m *Migrator) applyRepair(ctx context.Context, _ dynamostore.MigrationSnapshot) error {
	_, err := m.Repair(ctx)
	return err
}

// Repair converges the keys the last verify or refused finalize recorded,
// each from an atomic read of both copies, and clears the record. It may
// run while a finalization holds the barrier (the repair's own
// transactions do not check it); v1 is never written.
func (m *Migrator) Repair(ctx context.Context) (dynamostore.BackfillPageResult, error) {
	s, err := m.p.ReadMigration(ctx)
	if err != nil {
		return dynamostore.BackfillPageResult{}, err
	}
	if err := checkRepair(s); err != nil {
		return dynamostore.BackfillPageResult{}, err
	}
	res, err := m.p.ConvergeKeys(ctx, s.Diverged.Keys)
	if err != nil {
		return res, err
	}
	if err := m.crash("repair:converged"); err != nil {
		return res, err
	}
	fmt.Fprintf(m.opts.Progress, "repair: %d keys: created %d, repaired %d, removed %d, already equal %d\n",
		res.Scanned, res.Created, res.Repaired, res.Removed, res.Validated)
	return res, m.clearDiverged(ctx, s.Diverged.At, s.Diverged.More)
}

// clearDiverged removes the record of differences found at or before at,
// keeping a count of those beyond it (more) for a re-pass.
func (m *Migrator) clearDiverged(ctx context.Context, at time.Time, more int64) error {
	for range 8 {
		s, err := m.p.ReadMigration(ctx)
		if err != nil {
			return err
		}
		if s.Diverged == nil || s.Diverged.At.After(at) {
			return nil // a newer finding: keep it
		}
		n := s.Migration
		n.Diverged = nil
		if more > 0 {
			n.Diverged = &dynamostore.Diverged{More: more, By: s.Diverged.By, At: s.Diverged.At}
		}
		err = m.p.Transition(ctx, s, n, dynamostore.BarriersKeep)
		if err == nil || !isStateMoved(err) {
			return err
		}
	}
	return refused("the migration record kept changing; run the step again")
}

// recordDiverged records rep's differing keys (found by step by), so that
// finalize is refused until they are repaired; with dropVerified the last
// passing verify no longer counts either.
func (m *Migrator) recordDiverged(ctx context.Context, rep Report, by string, dropVerified bool) error {
	for range 8 {
		s, err := m.p.ReadMigration(ctx)
		if err != nil {
			return err
		}
		// Before the backfill completes (or while a re-pass runs)
		// differences are expected and the pass will converge them:
		// nothing is recorded, and the pass's cursor saves are not raced.
		if s.State != dynamostore.StateBackfill || !s.Backfill.Done || s.Backfill.Again != nil && !s.Backfill.Again.Done {
			return nil
		}
		n := s.Migration
		n.Diverged = &dynamostore.Diverged{Keys: rep.Keys, More: rep.More, By: by, At: m.now()}
		if dropVerified {
			n.Verified = nil
		}
		err = m.p.Transition(ctx, s, n, dynamostore.BarriersKeep)
		if err == nil || !isStateMoved(err) {
			return err
		}
	}
	return refused("the migration record kept changing; run the step again")
}

func isStateMoved(err error) bool { return errors.Is(err, dynamostore.ErrStateMoved) }

func checkAgain(s dynamostore.MigrationSnapshot) error {
	switch {
	case s.State != dynamostore.StateBackfill:
		return refused("backfill --again re-passes a completed backfill (state backfill); the table is in state %s", s.State)
	case !s.Backfill.Done:
		return refused("the first backfill pass is not complete (cursor %q); run `lake dynamo-migrate backfill` (it resumes)", s.Backfill.Cursor)
	case s.FinalizingSince != nil:
		return refused("finalization is in progress; finish it (finalize), repair recorded keys (repair) or abort it (abort-finalize)")
	}
	return nil
}

// BackfillAgain runs (or resumes) a full re-pass over both tables: every v1
// key converged to v2, then every v2 copy whose key v1 lacks removed, page
// by page with a durable cursor. When it completes it clears the recorded
// differences found before it started.
func (m *Migrator) BackfillAgain(ctx context.Context) (dynamostore.Repass, error) {
	s, err := m.p.ReadMigration(ctx)
	if err != nil {
		return dynamostore.Repass{}, err
	}
	if err := checkAgain(s); err != nil {
		return dynamostore.Repass{}, err
	}
	if s.Backfill.Again != nil && !s.Backfill.Again.Done {
		fmt.Fprintf(m.opts.Progress, "resuming the re-pass begun at %s (%s, cursor %q)\n", s.Backfill.Again.Started.Format(time.RFC3339), s.Backfill.Again.Phase, s.Backfill.Again.Cursor)
	} else {
		n := s.Migration
		n.Backfill.Again = &dynamostore.Repass{Phase: "v1", Started: m.now()}
		if err := m.p.Transition(ctx, s, n, dynamostore.BarriersKeep); err != nil {
			return dynamostore.Repass{}, err
		}
		if s, err = m.p.ReadMigration(ctx); err != nil {
			return dynamostore.Repass{}, err
		}
	}
	last := time.Now()
	for {
		if err := ctx.Err(); err != nil {
			return *s.Backfill.Again, err
		}
		a := *s.Backfill.Again
		var page dynamostore.BackfillPageResult
		if a.Phase == "v1" {
			page, err = m.p.RepassV1Page(ctx, a.Cursor, m.opts.PageSize)
		} else {
			page, err = m.p.RepassV2Page(ctx, a.Cursor, m.opts.PageSize)
		}
		if err != nil {
			return a, err
		}
		if err := m.crash("again:page-converged"); err != nil {
			return a, err
		}
		a.Cursor = page.Next
		if page.Next == "" && a.Phase == "v1" {
			a.Phase = "v2"
		} else if page.Next == "" {
			a.Done = true
		}
		a.Scanned += page.Scanned
		a.Created += page.Created
		a.Validated += page.Validated
		a.Repaired += page.Repaired
		a.Removed += page.Removed
		a.Updated = m.now()
		n := s.Migration
		n.Backfill.Again = &a
		if a.Done && n.Diverged != nil && !n.Diverged.At.After(a.Started) {
			n.Diverged = nil // every key was visited after it was found
		}
		// As in the first pass, the cursor moves only after every item of
		// the page converged.
		if err := m.p.Transition(ctx, s, n, dynamostore.BarriersKeep); err != nil {
			return a, fmt.Errorf("lake: saving the re-pass cursor: %w", err)
		}
		if s, err = m.p.ReadMigration(ctx); err != nil {
			return a, err
		}
		if a.Done {
			fmt.Fprintln(m.opts.Progress, againLine("backfill --again complete", a))
			return a, nil
		}
		if time.Since(last) >= 2*time.Second {
			fmt.Fprintln(m.opts.Progress, againLine("backfill --again", a))
			last = time.Now()
		}
	}
}

func againLine(head string, a dynamostore.Repass) string {
	return fmt.Sprintf("%s: %s pass, scanned %d, created %d, validated %d, repaired %d, removed %d",
		head, a.Phase, a.Scanned, a.Created, a.Validated, a.Repaired, a.Removed)
}

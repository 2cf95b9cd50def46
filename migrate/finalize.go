package migrate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lakemeta/lake/backend/dynamostore"
	"golang.org/x/sync/errgroup"
)

func checkFinalize(s dynamostore.MigrationSnapshot) error {
	switch {
	case s.State == dynamostore.StateV2Auth || s.State == dynamostore.StateV2Only:
		return refused("the migration is already finalized (state %s)", s.State)
	case s.State != dynamostore.StateBackfill:
		return refused("finalize needs a complete backfill; the table is in state %s", s.State)
	case !s.Backfill.Done:
		return refused("the backfill is not complete (cursor %q); run `lake dynamo-migrate backfill`", s.Backfill.Cursor)
	case s.Diverged != nil && len(s.Diverged.Keys) > 0:
		return refused("%d keys differ between v1 and v2 (found by %s at %s), first: %s; run `lake dynamo-migrate repair`",
			int64(len(s.Diverged.Keys))+s.Diverged.More, s.Diverged.By, s.Diverged.At.Format(time.RFC3339), quoteKeys(s.Diverged.Keys))
	case s.Diverged != nil:
		return refused("%d keys differ between v1 and v2 (found by %s at %s); run `lake dynamo-migrate backfill --again`", s.Diverged.More, s.Diverged.By, s.Diverged.At.Format(time.RFC3339))
	case s.Verified == nil && s.FinalizingSince == nil:
		return refused("no verify has passed since the backfill completed; run `lake dynamo-migrate verify`")
	}
	return nil
}

// FinalizeReport is what a finalization did.
type FinalizeReport struct {
	// Pause is how long writes were paused: from the barrier's
	// installation to the marker's publication.
	Pause time.Duration
	// Precheck is the online re-verification before the barrier; Reverify
	// the one under it.
	Precheck, Reverify Report
}

func (m *Migrator) applyFinalize(ctx context.Context, s dynamostore.MigrationSnapshot) error {
	_, err := m.Finalize(ctx)
	return err
}

// Finalize installs the barrier, re-verifies what changed since the last
// verify, and publishes the marker. A finalization interrupted after the
// barrier resumes from the re-verification.
func (m *Migrator) Finalize(ctx context.Context) (FinalizeReport, error) {
	var rep FinalizeReport
	s, err := m.p.ReadMigration(ctx)
	if err != nil {
		return rep, err
	}
	if err := checkFinalize(s); err != nil {
		return rep, err
	}
	_, v1only, err := m.Peers(ctx)
	if err != nil {
		return rep, err
	}
	if v1only > 0 {
		return rep, refused("%d live commit-capable peer(s) are v1-only; roll out dual mode everywhere first (lake dynamo-migrate status lists them)", v1only)
	}
	if s.FinalizingSince == nil && s.Verified != nil {
		// Before pausing anything: what changed since the recorded verify,
		// including v1 items without lake's stamp (a legacy writer's), by
		// filtered scans of both tables. Refuses without pausing writes.
		since := s.Verified.Started.Add(-ClockSkew)
		if rep.Precheck, err = m.verify(ctx, &since); err != nil {
			return rep, err
		}
		if !rep.Precheck.Clean() {
			if err := m.recordDiverged(ctx, rep.Precheck, "finalize", false); err != nil {
				return rep, err
			}
			return rep, fmt.Errorf("%w: changes since the last verify: %s; %s; writes were not paused: run `lake dynamo-migrate repair`, then finalize again", ErrDifferences, rep.Precheck.Summary(), rep.Precheck.Detail())
		}
		if s, err = m.p.ReadMigration(ctx); err != nil {
			return rep, err
		}
		if err := checkFinalize(s); err != nil {
			return rep, err
		}
	}
	start := m.now()
	if s.FinalizingSince == nil {
		n := s.Migration
		n.FinalizingSince = &start
		if err := m.p.Transition(ctx, s, n, dynamostore.BarriersInstall); err != nil {
			return rep, fmt.Errorf("lake: installing the write barrier: %w", err)
		}
		fmt.Fprintf(m.opts.Progress, "barrier installed: writes are paused\n")
		if s, err = m.p.ReadMigration(ctx); err != nil {
			return rep, err
		}
	} else {
		start = *s.FinalizingSince
		fmt.Fprintf(m.opts.Progress, "resuming the finalization begun at %s\n", start.Format(time.RFC3339))
	}
	if err := m.crash("finalize:barrier-installed"); err != nil {
		return rep, err
	}
	since := start
	if s.Verified != nil {
		since = s.Verified.Started
	}
	// Writers stamp the change log with their own clocks: reach back by
	// the tolerated skew.
	since = since.Add(-ClockSkew)
	if m.opts.FullReverify {
		rep.Reverify, err = m.verify(ctx, &since)
	} else {
		rep.Reverify, err = m.reverifyChanges(ctx, s.Barriers, since)
	}
	if err != nil {
		return rep, err
	}
	if !rep.Reverify.Clean() {
		if err := m.recordDiverged(ctx, rep.Reverify, "finalize", false); err != nil {
			return rep, err
		}
		return rep, fmt.Errorf("%w: re-verification under the barrier: %s; %s; writes stay paused: run `lake dynamo-migrate repair` and finalize again, or abort-finalize", ErrDifferences, rep.Reverify.Summary(), rep.Reverify.Detail())
	}
	if err := m.crash("finalize:reverified"); err != nil {
		return rep, err
	}
	n := m.next(s.Migration, dynamostore.StateV2Auth)
	at := m.now()
	n.FinalizedAt, n.FinalizingSince = &at, nil
	// One transaction: every barrier item still held, the v1 record
	// exactly as read, the marker published into v2.
	if err := m.p.Transition(ctx, s, n, dynamostore.BarriersHeld); err != nil {
		return rep, fmt.Errorf("lake: publishing the marker: %w", err)
	}
	rep.Pause = m.now().Sub(start)
	fmt.Fprintf(m.opts.Progress, "marker published: v2 is the authority (writes were paused %v)\n", rep.Pause.Round(time.Millisecond))
	return rep, nil
}

// ClockSkew is how far writers' clocks may lag the migrator's for the
// change log to be complete; finalize re-verifies changes from this long
// before the online verify started.
const ClockSkew = time.Minute

// reverifyChanges compares both copies of every key the change log says
// dual writes touched since since.
func (m *Migrator) reverifyChanges(ctx context.Context, shards int, since time.Time) (Report, error) {
	start := time.Now()
	var rep Report
	keys, err := m.p.ChangedKeys(ctx, max(shards, 1), since)
	if err != nil {
		return rep, err
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(m.opts.Segments)
	for _, k := range keys {
		g.Go(func() error {
			diff, differs, err := m.p.CompareKey(gctx, k)
			if err != nil {
				return err
			}
			mu.Lock()
			rep.Checked++
			if differs {
				rep.add(diff)
			}
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return rep, err
	}
	rep.Duration = time.Since(start)
	return rep, nil
}

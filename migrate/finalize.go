package migrate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
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
	// Records counts the stream records read, before and under the
	// barrier.
	Records int
}

func (m *Migrator) applyFinalize(ctx context.Context, s dynamostore.MigrationSnapshot) error {
	_, err := m.Finalize(ctx)
	return err
}

// DefaultSettle is how long finalize waits, under the barrier, before it
// reads the v1 table's stream: records arrive asynchronously (DynamoDB
// delivers them in near real time, typically well under a second), and a
// legacy write made before the barrier is caught when its record has
// arrived by then.
const DefaultSettle = 2 * time.Second

// ErrUnprovable is returned when finalize cannot prove that nothing changed
// in v1 since the verify (the stream does not cover the interval).
var ErrUnprovable = fmt.Errorf("%w: finalize cannot prove v1 unchanged since the verify", metastore.ErrRefused)

// Finalize checks, with writes flowing, every key changed since the
// recorded verify; installs the barrier; after the settle delay checks
// again what changed since; and publishes the marker. Changed keys come
// from the change log (lake's dual writes) and the v1 table's stream
// (every writer's PutItem, UpdateItem and DeleteItem), so the work follows
// what changed, not the table. With Options.FullReverify both checks are
// full scans instead. A finalization interrupted after the barrier resumes
// from the re-verification.
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
	// Where the stream is read from under the barrier: the precheck's end,
	// or the verify's mark when resuming.
	var from *dynamostore.StreamMark
	if s.Verified != nil {
		from = s.Verified.Stream
	}
	if s.FinalizingSince == nil && s.Verified != nil {
		// Before pausing anything. Refuses without pausing writes.
		if m.opts.FullReverify {
			rep.Precheck, err = m.verify(ctx, nil)
		} else {
			var end *dynamostore.StreamMark
			var n int
			// Online, writes flowing: the read may stop at what was
			// written after it began; the read under the barrier goes on.
			rep.Precheck, end, n, err = m.checkChanged(ctx, s, from, time.Now(), true)
			rep.Records += n
			from = end
		}
		if errors.Is(err, ErrUnprovable) {
			return rep, fmt.Errorf("%w; writes were not paused: run `lake dynamo-migrate verify` (a fresh verify enables the stream and marks it anew), then finalize; or `lake dynamo-migrate finalize --full-reverify` (scans both tables, online and under the barrier)", err)
		}
		if err != nil {
			return rep, err
		}
		if !rep.Precheck.Clean() {
			if err := m.recordDiverged(ctx, rep.Precheck, "finalize", false); err != nil {
				return rep, err
			}
			return rep, fmt.Errorf("%w: changes since the last verify: %s; %s; writes were not paused: run `lake dynamo-migrate repair`, then finalize again", ErrDifferences, rep.Precheck.Summary(), rep.Precheck.Detail())
		}
		if err := m.crash("finalize:prechecked"); err != nil {
			return rep, err
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
	if m.opts.FullReverify {
		rep.Reverify, err = m.verify(ctx, nil)
	} else {
		// Lake's writers are stopped; a legacy write's record may still
		// be on its way (the change log alone needs no wait: lake's
		// entries are written with the writes).
		if !m.opts.ChangeLogOnly {
			if err := ddb.Sleep(ctx, *m.opts.Settle); err != nil {
				return rep, err
			}
		}
		var n int
		// Lake's writers are paused: read to the tip, unless legacy
		// writers keep it moving; then stop at records created a clock
		// margin after the settle point (they are in the residual window).
		rep.Reverify, _, n, err = m.checkChanged(ctx, s, from, time.Now().Add(StreamClockMargin), false)
		rep.Records += n
	}
	if errors.Is(err, ErrUnprovable) {
		return rep, fmt.Errorf("%w; writes stay paused: run `lake dynamo-migrate finalize --full-reverify` to finish by scanning both tables, or `lake dynamo-migrate abort-finalize`, then verify and finalize again", err)
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

// StreamClockMargin is how far DynamoDB's clock (which stamps stream
// records) may run ahead of the migrator's: the read under the barrier
// stops only at records created this long after it began.
const StreamClockMargin = time.Minute

// ClockSkew is how far writers' clocks may lag the migrator's for the
// change log to be complete; finalize re-verifies changes from this long
// before the online verify started.
const ClockSkew = time.Minute

// checkChanged compares both copies of every key changed since the
// recorded verify: the keys the change log names (lake's dual writes since
// the verify began, reaching back by ClockSkew) and the keys the v1
// table's stream names after from (every writer's). It returns the
// comparison, where the stream read stopped, and the records read. When
// the stream cannot show the whole interval it fails with ErrUnprovable,
// naming what makes it provable. Options.ChangeLogOnly skips the stream
// (measurement only: it misses writes lake did not make).
func (m *Migrator) checkChanged(ctx context.Context, s dynamostore.MigrationSnapshot, from *dynamostore.StreamMark, upTo time.Time, partial bool) (Report, *dynamostore.StreamMark, int, error) {
	start := time.Now()
	since := m.now()
	if s.FinalizingSince != nil {
		since = *s.FinalizingSince
	}
	if s.Verified != nil {
		since = s.Verified.Started
	}
	// Writers stamp the change log with their own clocks: reach back by
	// the tolerated skew.
	keys, err := m.p.ChangedKeys(ctx, max(s.Barriers, 1), since.Add(-ClockSkew))
	if err != nil {
		return Report{}, nil, 0, err
	}
	var end *dynamostore.StreamMark
	records := 0
	if !m.opts.ChangeLogOnly {
		if from == nil {
			return Report{}, nil, 0, fmt.Errorf("%w: the verify recorded no position in the v1 table's stream", ErrUnprovable)
		}
		ch, err := m.p.StreamChangesSince(ctx, *from, upTo, partial)
		if errors.Is(err, dynamostore.ErrStreamGap) {
			return Report{}, nil, 0, fmt.Errorf("%w: %v", ErrUnprovable, err)
		}
		if err != nil {
			return Report{}, nil, 0, err
		}
		end, records = &ch.End, ch.Records
		seen := map[string]bool{}
		for _, k := range keys {
			seen[k] = true
		}
		for _, k := range ch.Keys {
			if !seen[k] {
				keys = append(keys, k)
			}
		}
	}
	rep, err := m.compareKeys(ctx, keys)
	rep.Duration = time.Since(start)
	return rep, end, records, err
}

// compareKeys compares both copies of each key, Options.Segments at once.
func (m *Migrator) compareKeys(ctx context.Context, keys []string) (Report, error) {
	var rep Report
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
	return rep, g.Wait()
}

// streamMark marks the v1 table's stream before a verify's scan, so that
// finalize reads every write after it. Without a readable stream the
// verify still runs and passes, and finalize then needs --full-reverify.
func (m *Migrator) streamMark(ctx context.Context) (*dynamostore.StreamMark, error) {
	mark, err := m.p.StreamMarkNow(ctx)
	if errors.Is(err, dynamostore.ErrStreamGap) {
		fmt.Fprintf(m.opts.Progress, "note: no stream position recorded (%v): finalize will need --full-reverify\n", err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &mark, nil
}

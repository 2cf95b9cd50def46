package migrate

import (
	"context"
	"errors"
	"fmt"

	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/sweep"
)

// sweepBackfill runs (or resumes) the backfill's sweep over v1 and returns
// what this run did. The handler converges each page; the sweep saves a
// segment's cursor in v2 only after its page converged, so a crash redoes at
// most one page per segment.
func (m *Migrator) sweepBackfill(ctx context.Context, s dynamostore.MigrationSnapshot) (sweep.Summary, error) {
	bar := newProgress(m.opts.Progress, dynamostore.BackfillProgress{})
	handle := m.p.BackfillHandler()
	opts := sweep.Options{
		Table:          m.p.Table(),
		Segments:       m.opts.Segments,
		PageSize:       m.opts.PageSize,
		ConsistentRead: true,
		MaxWCU:         m.opts.MaxWCU,
		DryRun:         m.opts.DryRun,
		Checkpoints:    crashCheckpoints{m.p.BackfillCheckpoints(s.Migration), m},
		Progress: func(p sweep.Progress) {
			bar.update(dynamostore.BackfillProgress{Scanned: p.Counts["scanned"], Created: p.Counts["created"],
				Validated: p.Counts["validated"], Repaired: p.Counts["repaired"]})
		},
	}
	sum, err := sweep.Run(ctx, m.p.SweepClient(), opts, func(ctx context.Context, p *sweep.Page) error {
		if err := handle(ctx, p); err != nil {
			return err
		}
		return m.crash("backfill:page-converged")
	})
	if sum.Resumed {
		fmt.Fprintf(m.opts.Progress, "resumed the backfill from its saved cursors (%d segments, as recorded)\n", sum.Segments)
	}
	if err != nil {
		return sum, err
	}
	if m.opts.DryRun {
		c := sum.Counts
		fmt.Fprintf(m.opts.Progress, "backfill dry run: scanned %d: would create %d, would repair %d, already equal %d (nothing written)\n",
			c["scanned"], c["would-create"], c["would-repair"], c["validated"])
		return sum, nil
	}
	if !sum.Complete {
		return sum, errors.New("lake: the backfill sweep stopped before the end of v1; run it again to resume")
	}
	bar.done()
	return sum, nil
}

// crashCheckpoints lets a test stop the backfill right after a cursor was
// saved, as a crash there would.
type crashCheckpoints struct {
	sweep.Checkpoints
	m *Migrator
}

func (c crashCheckpoints) Save(ctx context.Context, segment int, cur sweep.Cursor) error {
	if err := c.Checkpoints.Save(ctx, segment, cur); err != nil {
		return err
	}
	return c.m.crash("backfill:cursor-saved")
}

package migrate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
)

// Step is one migration step: a name, a check of whether the current state
// allows it (nil, or a reason), and an apply.
type Step struct {
	Name  string
	Check func(s dynamostore.MigrationSnapshot) error
	apply func(ctx context.Context, s dynamostore.MigrationSnapshot) error
}

// Steps returns every step, in rollout order.
func (m *Migrator) Steps() []Step {
	return []Step{
		{"dual", checkDual, m.applyDual},
		{"backfill", checkBackfill, m.applyBackfill},
		{"verify", checkVerify, m.applyVerify},
		{"repair", checkRepair, m.applyRepair},
		{"finalize", checkFinalize, m.applyFinalize},
		{"abort-finalize", checkAbort, m.applyAbort},
		{"rollback", checkRollback, m.applyRollback},
		{"retire-v1", checkRetire, m.applyRetire},
	}
}

// Run runs the named step: it reads the state, refuses with the check's
// reason (an error matching metastore.ErrRefused) or applies the step.
func (m *Migrator) Run(ctx context.Context, name string) error {
	for _, st := range m.Steps() {
		if st.Name != name {
			continue
		}
		s, err := m.p.ReadMigration(ctx)
		if err != nil {
			return err
		}
		if err := st.Check(s); err != nil {
			return err
		}
		return st.apply(ctx, s)
	}
	return fmt.Errorf("%w: unknown migration step %q", metastore.ErrInvalidArgument, name)
}

func checkDual(s dynamostore.MigrationSnapshot) error {
	if s.State != dynamostore.StateV1 {
		return refused("dual starts from state v1; the table is in state %s", s.State)
	}
	return nil
}

func (m *Migrator) applyDual(ctx context.Context, _ dynamostore.MigrationSnapshot) error {
	if err := m.p.CreateV2(ctx); err != nil {
		return err
	}
	if err := m.crash("dual:after-create-v2"); err != nil {
		return err
	}
	// Capture every v1 write from here on, lake's or not (streams.go).
	capture, err := m.p.EnableStream(ctx)
	if err != nil {
		return err
	}
	// CreateV2 may have created the table: read the snapshot again so the
	// transition guards on what is there now.
	s, err := m.p.ReadMigration(ctx)
	if err != nil {
		return err
	}
	if err := checkDual(s); err != nil {
		return err
	}
	n := m.next(s.Migration, dynamostore.StateDual)
	n.Barriers, n.DualSince = dynamostore.DefaultBarriers, n.Since
	n.Backfill, n.Verified, n.FinalizingSince = dynamostore.BackfillProgress{}, nil, nil
	n.Capture = &capture
	return m.p.Transition(ctx, s, n, dynamostore.BarriersKeep)
}

func checkBackfill(s dynamostore.MigrationSnapshot) error {
	switch {
	case s.State != dynamostore.StateDual && s.State != dynamostore.StateBackfill:
		return refused("backfill runs in state dual or backfill; the table is in state %s", s.State)
	case s.FinalizingSince != nil:
		return refused("finalization is in progress; finish it (finalize) or abort it (abort-finalize)")
	}
	return nil
}

// applyBackfill enters state backfill (once the gate opens) and copies v1
// into v2 with a parallel sweep (package sweep) whose per-segment cursors
// are durable in v2, then records the backfill complete.
func (m *Migrator) applyBackfill(ctx context.Context, s dynamostore.MigrationSnapshot) error {
	if s.State == dynamostore.StateDual && !m.opts.DryRun {
		if err := m.backfillGate(ctx, s); err != nil {
			return err
		}
		n := m.next(s.Migration, dynamostore.StateBackfill)
		if err := m.p.Transition(ctx, s, n, dynamostore.BarriersKeep); err != nil {
			return err
		}
		var err error
		if s, err = m.p.ReadMigration(ctx); err != nil {
			return err
		}
	}
	if s.Backfill.Done {
		fmt.Fprintf(m.opts.Progress, "backfill already complete: scanned %d, created %d, validated %d, repaired %d (to converge what changed in v1 since: `lake dynamo-migrate repair` for the keys verify named, `lake dynamo-migrate backfill --again` for a full re-pass)\n",
			s.Backfill.Scanned, s.Backfill.Created, s.Backfill.Validated, s.Backfill.Repaired)
		return nil
	}
	sum, err := m.sweepBackfill(ctx, s)
	if err != nil || m.opts.DryRun {
		return err
	}
	if err := m.crash("backfill:swept"); err != nil {
		return err
	}
	n := s.Migration
	n.Backfill.Done = true
	n.Backfill.Segments = sum.Segments
	n.Backfill.Scanned += sum.Counts["scanned"]
	n.Backfill.Created += sum.Counts["created"]
	n.Backfill.Validated += sum.Counts["validated"]
	n.Backfill.Repaired += sum.Counts["repaired"]
	n.Backfill.Updated = m.now()
	if err := m.p.Transition(ctx, s, n, dynamostore.BarriersKeep); err != nil {
		return fmt.Errorf("lake: recording the backfill complete: %w", err)
	}
	return nil
}

// backfillGate: every live commit-capable peer observes dual (or later),
// and one refresh interval has passed since the switch, so no store still
// routes writes by a cached state v1. Peers that lag are waited for, up to
// Options.GateWait, before the step is refused.
func (m *Migrator) backfillGate(ctx context.Context, s dynamostore.MigrationSnapshot) error {
	deadline := m.now().Add(m.opts.GateWait)
	for {
		lagging, err := m.laggingPeer(ctx, s)
		if err != nil {
			return err
		}
		if lagging == "" {
			break
		}
		if m.now().After(deadline) {
			return refused("%s", lagging)
		}
		if err := ddb.Sleep(ctx, m.opts.Refresh/2); err != nil {
			return err
		}
	}
	if wait := s.Since.Add(m.opts.Refresh).Sub(m.now()); wait > 0 {
		fmt.Fprintf(m.opts.Progress, "waiting %v for every store to observe dual (one refresh interval)\n", wait.Round(time.Millisecond))
		return ddb.Sleep(ctx, wait)
	}
	return nil
}

// laggingPeer describes a live commit-capable peer that does not observe
// the epoch of s yet, or returns "".
func (m *Migrator) laggingPeer(ctx context.Context, s dynamostore.MigrationSnapshot) (string, error) {
	live, _, err := m.Peers(ctx)
	if err != nil {
		return "", err
	}
	for _, n := range live {
		switch {
		case n.V1Only():
			return fmt.Sprintf("peer %s is v1-only (capability %s, layout %s, observes state %s): it does not dual-write; upgrade it to a dual-capable binary opened with layout auto, or stop it", n.ID, n.Capability, n.Layout, n.State), nil
		case n.Role == "commit" && n.Epoch < s.Epoch:
			return fmt.Sprintf("peer %s still observes state %s (epoch %d, layout %s); backfill starts when every live commit-capable peer observes dual (epoch %d)", n.ID, n.State, n.Epoch, n.Layout, s.Epoch), nil
		}
	}
	return "", nil
}

func checkVerify(s dynamostore.MigrationSnapshot) error {
	switch s.State {
	case dynamostore.StateDual, dynamostore.StateBackfill, dynamostore.StateV2Auth:
		return nil
	}
	return refused("verify compares v1 and v2; the table is in state %s", s.State)
}

func (m *Migrator) applyVerify(ctx context.Context, s dynamostore.MigrationSnapshot) error {
	_, err := m.Verify(ctx)
	return err
}

// ErrDifferences is returned when a verification found differences.
var ErrDifferences = fmt.Errorf("%w: v1 and v2 differ", metastore.ErrRefused)

// Verify compares v1 and v2 in both directions (read-only, safe during live
// writes) and returns the report. A clean verify after a complete backfill
// is recorded in the migration record, which finalize requires.
func (m *Migrator) Verify(ctx context.Context) (Report, error) {
	s, err := m.p.ReadMigration(ctx)
	if err != nil {
		return Report{}, err
	}
	if err := checkVerify(s); err != nil {
		return Report{}, err
	}
	started := m.now()
	// The position finalize reads the stream from, taken before the scan;
	// only a verify that is recorded needs one.
	var mark *dynamostore.StreamMark
	if s.State == dynamostore.StateBackfill && s.Backfill.Done && s.FinalizingSince == nil {
		if mark, err = m.streamMark(ctx); err != nil {
			return Report{}, err
		}
	}
	rep, err := m.verify(ctx, nil)
	if err != nil {
		return rep, err
	}
	if !rep.Clean() {
		// Recorded for repair; the last passing verify no longer counts.
		if err := m.recordDiverged(ctx, rep, "verify", true); err != nil {
			return rep, err
		}
		return rep, fmt.Errorf("%w: %s; %s; run `lake dynamo-migrate repair`", ErrDifferences, rep.Summary(), rep.Detail())
	}
	if s.Diverged != nil && s.FinalizingSince == nil && (s.Backfill.Again == nil || s.Backfill.Again.Done) {
		if err := m.clearDiverged(ctx, started, 0); err != nil {
			return rep, err
		}
		if s, err = m.p.ReadMigration(ctx); err != nil {
			return rep, err
		}
	}
	if s.State == dynamostore.StateBackfill && s.Backfill.Done && s.FinalizingSince == nil {
		s2, err := m.p.ReadMigration(ctx)
		if err != nil {
			return rep, err
		}
		if s2.Epoch != s.Epoch {
			return rep, refused("the migration moved to epoch %d during the verify; run it again", s2.Epoch)
		}
		n := s2.Migration
		n.Verified = &dynamostore.Verification{At: m.now(), Started: started, Checked: rep.Checked, Stream: mark}
		if err := m.p.Transition(ctx, s2, n, dynamostore.BarriersKeep); err != nil {
			return rep, err
		}
		rep.Recorded = true
	}
	return rep, nil
}

func checkAbort(s dynamostore.MigrationSnapshot) error {
	if s.FinalizingSince == nil || s.ReadsV2() {
		return refused("no finalization is in progress (state %s)", s.State)
	}
	return nil
}

// applyAbort removes the barrier in a transaction that checks the marker
// is absent; writes resume in dual mode.
func (m *Migrator) applyAbort(ctx context.Context, s dynamostore.MigrationSnapshot) error {
	n := s.Migration
	n.FinalizingSince = nil
	return m.p.Transition(ctx, s, n, dynamostore.BarriersRemove)
}

func checkRollback(s dynamostore.MigrationSnapshot) error {
	switch s.State {
	case dynamostore.StateDual, dynamostore.StateBackfill:
		return nil
	case dynamostore.StateV2Auth, dynamostore.StateV2Only:
		return refused("the migration is finalized: v2 is the authority, so rolling back to v1 is not safe with a v1-only binary; keep running dual-capable binaries (they mirror v1)")
	}
	return refused("nothing to roll back (state %s)", s.State)
}

// applyRollback returns to v1 before finalization: epoch+1, the cursor and
// any verification discarded, the barrier removed if a finalization held it.
func (m *Migrator) applyRollback(ctx context.Context, s dynamostore.MigrationSnapshot) error {
	n := m.next(s.Migration, dynamostore.StateV1)
	n.Backfill, n.Verified, n.FinalizingSince, n.DualSince = dynamostore.BackfillProgress{}, nil, nil, time.Time{}
	barriers := dynamostore.BarriersKeep
	if s.FinalizingSince != nil {
		barriers = dynamostore.BarriersRemove
	}
	return m.p.Transition(ctx, s, n, barriers)
}

func checkRetire(s dynamostore.MigrationSnapshot) error {
	switch {
	case s.State == dynamostore.StateV2Only && s.HasV1:
		return nil // mirroring has stopped; only deleting the v1 table is left
	case s.State == dynamostore.StateV2Only && s.Standalone:
		return refused("this is a standalone v2 table (created with layout v2): there is no v1 table to retire")
	case s.State == dynamostore.StateV2Only:
		return refused("v1 is retired and its table is gone: the migration is complete, nothing is left to do")
	case s.State != dynamostore.StateV2Auth:
		return refused("retire-v1 follows finalization; the table is in state %s", s.State)
	}
	return nil
}

func (m *Migrator) applyRetire(ctx context.Context, s dynamostore.MigrationSnapshot) error {
	return m.RetireV1(ctx, false)
}

// RetireAt is when retire-v1 becomes allowed for s: the retention horizon
// after finalization, or at once when the v1 table is already gone.
func (m *Migrator) RetireAt(s dynamostore.MigrationSnapshot) time.Time {
	if s.FinalizedAt == nil || !s.HasV1 {
		return time.Time{}
	}
	return s.FinalizedAt.Add(*m.opts.Retention)
}

// RetireV1 stops v1 mirroring (state v2-only), refused until every live
// peer is dual-capable and the retention horizon has passed since
// finalization; with deleteTable it then deletes the v1 table. A v1 table
// that is already gone is retired at once (there is nothing left to keep).
// In state v2-only, with deleteTable, it deletes a v1 table still there.
func (m *Migrator) RetireV1(ctx context.Context, deleteTable bool) error {
	s, err := m.p.ReadMigration(ctx)
	if err != nil {
		return err
	}
	if err := checkRetire(s); err != nil {
		return err
	}
	if s.State == dynamostore.StateV2Only {
		if !deleteTable {
			return refused("v1 is already retired (state v2-only); its table %q is still there: add --delete-table to delete it", m.p.Table())
		}
		return m.p.DeleteV1Table(ctx)
	}
	if at := m.RetireAt(s); m.now().Before(at) {
		return refused("v1 is kept for the retention horizon (%v) after finalization: retire-v1 is allowed from %s (%v left; --retention sets the horizon)",
			*m.opts.Retention, at.Format(time.RFC3339), at.Sub(m.now()).Round(time.Second))
	}
	live, _, err := m.Peers(ctx)
	if err != nil {
		return err
	}
	for _, n := range live {
		if n.Capability != "dual" {
			return refused("peer %s is not v2-capable (capability %s, layout %s)", n.ID, n.Capability, n.Layout)
		}
	}
	if err := m.p.Transition(ctx, s, m.next(s.Migration, dynamostore.StateV2Only), dynamostore.BarriersKeep); err != nil {
		return err
	}
	if deleteTable && s.HasV1 {
		return m.p.DeleteV1Table(ctx)
	}
	return nil
}

// IsRefused reports whether err is a refusal of a step.
func IsRefused(err error) bool { return errors.Is(err, metastore.ErrRefused) }

// quoteKeys names the first keys of a list, for messages.
func quoteKeys(keys []string) string {
	var q []string
	for _, k := range keys[:min(len(keys), firstInError)] {
		q = append(q, strconv.Quote(k))
	}
	if len(keys) > firstInError {
		q = append(q, fmt.Sprintf("and %d more", len(keys)-firstInError))
	}
	return strings.Join(q, ", ")
}

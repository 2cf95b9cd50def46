package migrate

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lakemeta/lake/backend/dynamostore"
)

// Status is what `lake dynamo-migrate status` shows.
type Status struct {
	Table     string                       `json:"table"`
	State     dynamostore.State            `json:"state"`
	Epoch     int64                        `json:"epoch"`
	Since     time.Time                    `json:"since"`
	Backfill  dynamostore.BackfillProgress `json:"backfill"`
	Verified  *dynamostore.Verification    `json:"verified,omitempty"`
	Finalized *time.Time                   `json:"finalized_at,omitempty"`
	// Finalizing is set while the barrier is held without a marker.
	Finalizing *time.Time             `json:"finalizing_since,omitempty"`
	Peers      []dynamostore.NodeInfo `json:"live_peers"`
	V1Only     int                    `json:"v1_only_peers"`
	Allowed    []string               `json:"allowed_steps"`
	Hint       string                 `json:"hint,omitempty"`
}

// Status reads the migration's state, progress and peers.
func (m *Migrator) Status(ctx context.Context) (Status, error) {
	s, err := m.p.ReadMigration(ctx)
	if err != nil {
		return Status{}, err
	}
	live, v1only, err := m.Peers(ctx)
	if err != nil {
		return Status{}, err
	}
	st := Status{Table: m.p.Table(), State: s.State, Epoch: s.Epoch, Since: s.Since, Backfill: s.Backfill,
		Verified: s.Verified, Finalized: s.FinalizedAt, Finalizing: s.FinalizingSince, Peers: live, V1Only: v1only}
	for _, step := range m.Steps() {
		if step.Check(s) == nil {
			st.Allowed = append(st.Allowed, step.Name)
		}
	}
	switch {
	case s.FinalizingSince != nil:
		st.Hint = fmt.Sprintf("a finalization holds the write barrier since %s (writes are paused): run `lake dynamo-migrate finalize` to finish it or `lake dynamo-migrate abort-finalize` to resume writes", s.FinalizingSince.Format(time.RFC3339))
	case s.State == dynamostore.StateV1:
		st.Hint = "roll out dual-capable binaries, then run `lake dynamo-migrate dual`"
	case s.State == dynamostore.StateDual:
		st.Hint = "when every node observes dual, run `lake dynamo-migrate backfill`"
	case s.State == dynamostore.StateBackfill && !s.Backfill.Done:
		st.Hint = "run `lake dynamo-migrate backfill` (it resumes from the cursor)"
	case s.State == dynamostore.StateBackfill && s.Verified == nil:
		st.Hint = "run `lake dynamo-migrate verify`"
	case s.State == dynamostore.StateBackfill:
		st.Hint = "run `lake dynamo-migrate finalize` (writes pause briefly)"
	case s.State == dynamostore.StateV2Auth:
		st.Hint = "restart runtime pods so they observe v2; keep v1 through the retention horizon, then `lake dynamo-migrate retire-v1`"
	}
	return st, nil
}

// Print writes st for people.
func (st Status) Print(w io.Writer) {
	fmt.Fprintf(w, "table:       %s (v2: %s%s)\n", st.Table, st.Table, dynamostore.V2Suffix)
	fmt.Fprintf(w, "state:       %s (epoch %d", st.State, st.Epoch)
	if !st.Since.IsZero() {
		fmt.Fprintf(w, ", since %s", st.Since.Format(time.RFC3339))
	}
	fmt.Fprintln(w, ")")
	b := st.Backfill
	fmt.Fprintf(w, "backfill:    done=%v cursor=%q scanned=%d created=%d validated=%d repaired=%d\n", b.Done, b.Cursor, b.Scanned, b.Created, b.Validated, b.Repaired)
	if st.Verified != nil {
		fmt.Fprintf(w, "verified:    %s (%d keys)\n", st.Verified.At.Format(time.RFC3339), st.Verified.Checked)
	}
	if st.Finalized != nil {
		fmt.Fprintf(w, "finalized:   %s\n", st.Finalized.Format(time.RFC3339))
	}
	fmt.Fprintf(w, "peers:       %d live, v1-only: %d\n", len(st.Peers), st.V1Only)
	for _, n := range st.Peers {
		fmt.Fprintf(w, "  %s role=%s capability=%s layout=%s observes=%s@%d heartbeat=%s\n", n.ID, n.Role, n.Capability, n.Layout, n.State, n.Epoch, n.Heartbeat.Format(time.RFC3339))
	}
	fmt.Fprintf(w, "next steps:  %s\n", strings.Join(st.Allowed, ", "))
	if st.Hint != "" {
		fmt.Fprintf(w, "hint:        %s\n", st.Hint)
	}
}

package migrate

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lakemeta/lake/metastore/dynamostore"
)

// Status is what `lake dynamo-migrate status` shows.
type Status struct {
	Table string `json:"table"`
	// V1Table tells whether the v1 table exists; Standalone marks a v2
	// table created without a migration (layout v2, no v1 table).
	V1Table    bool                         `json:"v1_table_exists"`
	Standalone bool                         `json:"standalone_v2,omitempty"`
	State      dynamostore.State            `json:"state"`
	Epoch      int64                        `json:"epoch"`
	Since      time.Time                    `json:"since"`
	Backfill   dynamostore.BackfillProgress `json:"backfill"`
	Verified   *dynamostore.Verification    `json:"verified,omitempty"`
	Diverged   *dynamostore.Diverged        `json:"diverged,omitempty"`
	// Capture is where the v1 table's stream began capturing (dual).
	Capture   *dynamostore.StreamMark `json:"stream_capture,omitempty"`
	Finalized *time.Time              `json:"finalized_at,omitempty"`
	// Finalizing is set while the barrier is held without a marker.
	Finalizing *time.Time `json:"finalizing_since,omitempty"`
	// RetireAt is when retire-v1 becomes allowed, while it is not yet.
	RetireAt *time.Time `json:"retire_v1_allowed_from,omitempty"`
	Peers    []Peer     `json:"live_peers"`
	V1Only   int        `json:"v1_only_peers"`
	Allowed  []string   `json:"allowed_steps"`
	Hint     string     `json:"hint,omitempty"`
}

// Peer is a live node of the registry, as status shows it.
type Peer struct {
	dynamostore.NodeInfo
	// V1Only marks a commit-capable peer that does not dual-write: it
	// holds back backfill and finalize.
	V1Only bool `json:"v1_only"`
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
	st := Status{Table: m.p.Table(), V1Table: s.HasV1, Standalone: s.Standalone, State: s.State, Epoch: s.Epoch, Since: s.Since,
		Backfill: s.Backfill, Verified: s.Verified, Diverged: s.Diverged, Capture: s.Capture, Finalized: s.FinalizedAt, Finalizing: s.FinalizingSince,
		Peers: []Peer{}, V1Only: v1only, Allowed: []string{}}
	var v1peers []string
	for _, n := range live {
		st.Peers = append(st.Peers, Peer{NodeInfo: n, V1Only: n.V1Only()})
		if n.V1Only() {
			v1peers = append(v1peers, fmt.Sprintf("%s (layout %s, capability %s)", n.ID, n.Layout, n.Capability))
		}
	}
	retireAt := m.RetireAt(s)
	for _, step := range m.Steps() {
		if step.Check(s) != nil {
			continue
		}
		if step.Name == "retire-v1" && m.now().Before(retireAt) {
			st.RetireAt = &retireAt
			continue
		}
		st.Allowed = append(st.Allowed, step.Name)
	}
	if s.State == dynamostore.StateBackfill && checkAgain(s) == nil {
		st.Allowed = append(st.Allowed, "backfill --again")
	}
	st.Hint = m.hint(s, v1peers, retireAt)
	return st, nil
}

// hint is the next thing to do, in words.
func (m *Migrator) hint(s dynamostore.MigrationSnapshot, v1peers []string, retireAt time.Time) string {
	v1 := m.p.Table()
	switch {
	case s.Standalone:
		return "a standalone v2 table (created by `lake init` with layout v2): there is no v1 table and no migration; nothing to do"
	case s.FinalizingSince != nil && s.Diverged != nil:
		return fmt.Sprintf("a finalization holds the write barrier since %s (writes are paused) and found differences: run `lake dynamo-migrate repair`, then `lake dynamo-migrate finalize` again, or `lake dynamo-migrate abort-finalize` to resume writes", s.FinalizingSince.Format(time.RFC3339))
	case s.FinalizingSince != nil:
		return fmt.Sprintf("a finalization holds the write barrier since %s (writes are paused): run `lake dynamo-migrate finalize` to finish it or `lake dynamo-migrate abort-finalize` to resume writes", s.FinalizingSince.Format(time.RFC3339))
	case len(v1peers) > 0 && (s.State == dynamostore.StateDual || s.State == dynamostore.StateBackfill):
		return fmt.Sprintf("v1-only peer(s) %s do not dual-write: upgrade them to dual-capable binaries opened with layout auto (or stop them) before backfill and finalize", strings.Join(v1peers, ", "))
	case s.State == dynamostore.StateV1:
		return "roll out dual-capable binaries, then run `lake dynamo-migrate dual`"
	case s.State == dynamostore.StateDual:
		return "when every node observes dual, run `lake dynamo-migrate backfill`"
	case s.State == dynamostore.StateBackfill && !s.Backfill.Done:
		return "run `lake dynamo-migrate backfill` (it resumes from its saved cursors)"
	case s.Diverged != nil && len(s.Diverged.Keys) > 0:
		return fmt.Sprintf("%d keys differ (found by %s at %s): run `lake dynamo-migrate repair`, then `lake dynamo-migrate verify`", int64(len(s.Diverged.Keys))+s.Diverged.More, s.Diverged.By, s.Diverged.At.Format(time.RFC3339))
	case s.Diverged != nil:
		return fmt.Sprintf("%d keys differ (found by %s): run `lake dynamo-migrate backfill --again`, then `lake dynamo-migrate verify`", s.Diverged.More, s.Diverged.By)
	case s.State == dynamostore.StateBackfill && s.Verified == nil:
		return "run `lake dynamo-migrate verify`"
	case s.State == dynamostore.StateBackfill && s.Verified.Stream == nil:
		return "the verify recorded no position in the v1 table's stream: run `lake dynamo-migrate verify` again (it records one), or `lake dynamo-migrate finalize --full-reverify` (full scans)"
	case s.State == dynamostore.StateBackfill:
		return fmt.Sprintf("run `lake dynamo-migrate finalize` (writes pause briefly) before %s: the stream keeps records 24 hours, after that finalize needs a fresh verify", s.Verified.Stream.At.Add(24*time.Hour).Format(time.RFC3339))
	case s.State == dynamostore.StateV2Auth && !s.HasV1:
		return fmt.Sprintf("the v1 table %q is missing (deleted after finalization): reads and writes use v2 alone; run `lake dynamo-migrate retire-v1` to record state v2-only", v1)
	case s.State == dynamostore.StateV2Auth && m.now().Before(retireAt):
		return fmt.Sprintf("restart runtime pods so they observe v2; v1 is kept (and mirrored) through the retention horizon: `lake dynamo-migrate retire-v1` is allowed from %s", retireAt.Format(time.RFC3339))
	case s.State == dynamostore.StateV2Auth:
		return "restart runtime pods so they observe v2; the retention horizon has passed: `lake dynamo-migrate retire-v1` stops mirroring v1 (add --delete-table to delete it)"
	case s.State == dynamostore.StateV2Only && s.HasV1:
		return fmt.Sprintf("v1 is retired (no longer mirrored); its table %q still exists: `lake dynamo-migrate retire-v1 --delete-table` deletes it", v1)
	case s.State == dynamostore.StateV2Only:
		return "the migration is complete: v2 alone, the v1 table is gone; nothing left to do"
	}
	return ""
}

// Print writes st for people.
func (st Status) Print(w io.Writer) {
	v1 := "present"
	if !st.V1Table {
		v1 = "missing"
	}
	if st.Standalone {
		fmt.Fprintf(w, "table:       %s%s (standalone v2 table: no v1 table, no migration)\n", st.Table, dynamostore.V2Suffix)
	} else {
		fmt.Fprintf(w, "table:       %s (v1: %s; v2: %s%s)\n", st.Table, v1, st.Table, dynamostore.V2Suffix)
	}
	fmt.Fprintf(w, "state:       %s (epoch %d", st.State, st.Epoch)
	if !st.Since.IsZero() {
		fmt.Fprintf(w, ", since %s", st.Since.Format(time.RFC3339))
	}
	fmt.Fprintln(w, ")")
	if !st.Standalone {
		b := st.Backfill
		fmt.Fprintf(w, "backfill:    done=%v segments=%d scanned=%d created=%d validated=%d repaired=%d\n", b.Done, b.Segments, b.Scanned, b.Created, b.Validated, b.Repaired)
		if a := b.Again; a != nil {
			fmt.Fprintf(w, "re-pass:     done=%v phase=%s cursor=%q scanned=%d created=%d validated=%d repaired=%d removed=%d\n", a.Done, a.Phase, a.Cursor, a.Scanned, a.Created, a.Validated, a.Repaired, a.Removed)
		}
	}
	if st.Verified != nil {
		pos := "no stream position: finalize needs a fresh verify or --full-reverify"
		if m := st.Verified.Stream; m != nil {
			pos = fmt.Sprintf("stream position in %d shards", len(m.Shards))
		}
		fmt.Fprintf(w, "verified:    %s (%d keys; %s)\n", st.Verified.At.Format(time.RFC3339), st.Verified.Checked, pos)
	}
	if d := st.Diverged; d != nil {
		fmt.Fprintf(w, "diverged:    %d keys (found by %s at %s)", int64(len(d.Keys))+d.More, d.By, d.At.Format(time.RFC3339))
		if len(d.Keys) > 0 {
			fmt.Fprintf(w, ", first: %s", quoteKeys(d.Keys))
		}
		fmt.Fprintln(w)
	}
	if c := st.Capture; c != nil && !st.Standalone {
		fmt.Fprintf(w, "stream:      %s (capturing v1 writes since %s)\n", c.Arn, c.At.Format(time.RFC3339))
	}
	if st.Finalized != nil {
		fmt.Fprintf(w, "finalized:   %s\n", st.Finalized.Format(time.RFC3339))
	}
	fmt.Fprintf(w, "peers:       %d live, v1-only: %d\n", len(st.Peers), st.V1Only)
	for _, n := range st.Peers {
		mark := ""
		if n.V1Only {
			mark = " V1-ONLY"
		}
		fmt.Fprintf(w, "  %s%s role=%s capability=%s layout=%s observes=%s@%d heartbeat=%s\n", n.ID, mark, n.Role, n.Capability, n.Layout, n.State, n.Epoch, n.Heartbeat.Format(time.RFC3339))
	}
	next := strings.Join(st.Allowed, ", ")
	if st.RetireAt != nil {
		next = strings.TrimPrefix(next+", retire-v1 from "+st.RetireAt.Format(time.RFC3339), ", ")
	}
	if next == "" {
		next = "none"
	}
	fmt.Fprintf(w, "next steps:  %s\n", next)
	if st.Hint != "" {
		fmt.Fprintf(w, "hint:        %s\n", st.Hint)
	}
}

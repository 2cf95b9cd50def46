package dynamostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/keyspace"
	"github.com/lakemeta/lake/metastore"
)

// State is a durable migration state.
type State string

// The migration states, in order. NB: written in tables; must not change.
const (
	StateV1       State = "v1"               // reads and writes use the legacy table
	StateDual     State = "dual"             // v1 is read authority; every mutation updates v1 and v2 atomically
	StateBackfill State = "backfill"         // dual, and the migrator copies v1 into v2
	StateV2Auth   State = "v2-authoritative" // the marker is published: v2 is read authority, v1 is mirrored
	StateV2Only   State = "v2-only"          // v1 retired: v2 alone
)

// DefaultBarriers is the number of write-barrier items a migration uses.
// Each dual mutation checks the one its key hashes to, so writes spread over
// them instead of contending on one item; finalization checks all of them in
// the marker transaction, which DynamoDB bounds at 100 items.
const DefaultBarriers = 16

// Control record keys of the migration. NB: must not change.
const (
	migrationKey  = metastore.ControlPrefix + "migration"
	barrierKeyFmt = metastore.ControlPrefix + "barrier/%03d"
	NodeKeyPrefix = metastore.ControlPrefix + "node/"
	maxBarriers   = 90
)

// Migration is the durable migration record. The v1 table holds it until the
// marker is published; from then on the v2 table holds it too (the marker),
// and a store that finds v2-authoritative in either treats v2 as authority.
type Migration struct {
	State State `json:"state"`
	// Epoch grows by one on every transition; cursors carry it.
	Epoch int64 `json:"epoch"`
	// Since is when the current state was entered.
	Since time.Time `json:"since"`
	// DualSince is when the current dual period began (dual and backfill);
	// v2 copies lake wrote before it are leftovers of a rolled-back period.
	DualSince time.Time `json:"dual_since,omitzero"`
	// Barriers is the number of barrier items, fixed when dual starts.
	Barriers int `json:"barriers,omitempty"`
	// Backfill is the backfill's durable progress.
	Backfill BackfillProgress `json:"backfill"`
	// Verified is the last verification that passed in this epoch.
	Verified *Verification `json:"verified,omitempty"`
	// Diverged lists the keys the last verify or refused finalize found
	// different; finalize is refused until a repair converges them.
	Diverged *Diverged `json:"diverged,omitempty"`
	// Capture is where the v1 table's stream began capturing when this
	// dual period began (streams.go); nil for a period begun before lake
	// enabled streams (verify enables it then).
	Capture *StreamMark `json:"capture,omitempty"`
	// FinalizingSince is set while the barrier is installed and the marker
	// not yet published (writes are paused).
	FinalizingSince *time.Time `json:"finalizing_since,omitempty"`
	// FinalizedAt is when the marker was published.
	FinalizedAt *time.Time `json:"finalized_at,omitempty"`
}

// BackfillProgress is the durable state of the backfill.
type BackfillProgress struct {
	// Cursor is the v1 scan position of a backfill begun by a binary that
	// backfilled in one segment; the sweep keeps its cursors in v2
	// (Primitives.BackfillCheckpoints) and leaves it empty.
	Cursor string `json:"cursor,omitempty"`
	Done   bool   `json:"done,omitempty"`
	// Segments is the number of parallel scan segments the backfill ran
	// with (its cursors are in v2, see Primitives.BackfillCheckpoints).
	Segments  int       `json:"segments,omitempty"`
	Scanned   int64     `json:"scanned"`
	Created   int64     `json:"created"`
	Validated int64     `json:"validated"`
	Repaired  int64     `json:"repaired"`
	Removed   int64     `json:"removed,omitempty"`
	Updated   time.Time `json:"updated,omitzero"`
	// Again is the progress of the last full re-pass over both tables
	// (`backfill --again`); nil before the first.
	Again *Repass `json:"again,omitempty"`
}

// Repass is the durable progress of a full re-pass: v1 first (every v1
// key converged to v2), then v2 (every v2 copy whose key v1 lacks removed).
type Repass struct {
	// Phase is "v1" or "v2"; Cursor the scan position in that table.
	Phase     string    `json:"phase"`
	Cursor    string    `json:"cursor,omitempty"`
	Done      bool      `json:"done,omitempty"`
	Started   time.Time `json:"started"`
	Updated   time.Time `json:"updated,omitzero"`
	Scanned   int64     `json:"scanned"`
	Created   int64     `json:"created"`
	Validated int64     `json:"validated"`
	Repaired  int64     `json:"repaired"`
	Removed   int64     `json:"removed"`
}

// Diverged records keys found different, for `lake dynamo-migrate repair`.
type Diverged struct {
	// Keys are the differing keys, at most MaxDivergedKeys.
	Keys []string `json:"keys"`
	// More counts differing keys found beyond Keys: only a full re-pass
	// (`backfill --again`) reaches them.
	More int64 `json:"more,omitempty"`
	// By is the step that found them ("verify" or "finalize"), At when.
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// MaxDivergedKeys bounds Diverged.Keys, so the record stays far below
// DynamoDB's item size limit whatever the keys.
const MaxDivergedKeys = 100

// Verification is the result of a verification that passed.
type Verification struct {
	At      time.Time `json:"at"`
	Started time.Time `json:"started"`
	Checked int64     `json:"checked"`
	// Stream is the v1 table's stream position taken before the scan
	// began: finalize re-checks every key written after it. Nil when no
	// stream could be read (finalize then needs --full-reverify).
	Stream *StreamMark `json:"stream,omitempty"`
}

// Barrier returns the barrier item a key's dual mutations check.
func (m Migration) Barrier(key string) int {
	n := m.Barriers
	if n <= 0 {
		n = DefaultBarriers
	}
	return keyspace.Barrier(key, n)
}

// BarrierKey is the control key of barrier item i.
func BarrierKey(i int) string { return fmt.Sprintf(barrierKeyFmt, i) }

// ReadsV2 reports whether v2 is the read authority in m's state.
func (m Migration) ReadsV2() bool { return m.State == StateV2Auth || m.State == StateV2Only }

// Marshal encodes m for its control record.
func (m Migration) Marshal() []byte {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // plain data always encodes
	}
	return b
}

// errNoMigration: neither table holds a migration record.
var errNoMigration = errors.New("no migration record")

// stateSnapshot is what a store knows of the migration: the record, the
// exact bytes of it in the v1 table (for exact-value guarded transitions),
// and whether each table exists.
type stateSnapshot struct {
	m       Migration
	raw1    []byte // the v1 record's bytes; nil when absent
	raw2    []byte // the v2 marker's bytes; nil when absent
	hasV1   bool
	hasV2   bool
	fetched time.Time
}

// readState reads the migration record from both tables. A missing record
// in a present v1 table means the legacy state v1 at epoch 0. A missing v1
// table with a marker in v2 means v2 authority, never v1.
func (d *Driver) readState(ctx context.Context) (stateSnapshot, error) {
	var s stateSnapshot
	item1, found1, err := d.getControl(ctx, d.v1, migrationKey)
	switch {
	case errors.Is(err, ErrNoTable):
	case err != nil:
		return s, err
	default:
		s.hasV1 = true
		if found1 {
			s.raw1 = valueOf(item1)
		}
	}
	item2, found2, err := d.getControl(ctx, d.v2, migrationKey)
	switch {
	case errors.Is(err, ErrNoTable):
	case err != nil:
		return s, err
	default:
		s.hasV2 = true
		if found2 {
			s.raw2 = valueOf(item2)
		}
	}
	var m1, m2 Migration
	if s.raw1 != nil {
		if err := json.Unmarshal(s.raw1, &m1); err != nil {
			return s, fmt.Errorf("lake: migration record in %q: %w", d.v1, err)
		}
	}
	if s.raw2 != nil {
		if err := json.Unmarshal(s.raw2, &m2); err != nil {
			return s, fmt.Errorf("lake: migration marker in %q: %w", d.v2, err)
		}
	}
	switch {
	case s.raw2 != nil && (s.raw1 == nil || m2.Epoch >= m1.Epoch || m2.ReadsV2()):
		s.m = m2
	case s.raw1 != nil:
		s.m = m1
	case s.hasV1:
		s.m = Migration{State: StateV1}
	default:
		return s, errNoMigration
	}
	if m1.ReadsV2() && !s.m.ReadsV2() {
		s.m = m1 // the marker in v1 wins over an older v2 copy
	}
	s.fetched = time.Now()
	return s, nil
}

func valueOf(item map[string]types.AttributeValue) []byte {
	if v, ok := item[attrValue].(*types.AttributeValueMemberB); ok {
		return v.Value
	}
	return nil
}

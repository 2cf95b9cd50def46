// Package migrate moves a live lake table from the legacy v1 layout to the
// prefix-isolated v2 layout with zero downtime and no lost or regressed
// record (seed 000, "Authority and migration state machine").
//
// # States
//
//	v1 ──dual──▶ dual ──backfill──▶ backfill ──finalize──▶ v2-authoritative ──retire-v1──▶ v2-only
//	 ▲             │                   │
//	 └──rollback───┴───────────────────┘
//
// Each state is a durable record with an epoch that only grows; every
// transition is one transaction guarded on the exact bytes of the record it
// replaces, so two migrators can never both apply a step. Stores opened with
// layout auto route by the record (see package dynamostore).
//
// # Steps
//
// Every step is a value with a name, a check that says whether the current
// state allows it (and why not), and an apply; status, refusals and
// resumption all come from that one shape.
//
//   - dual: creates the v2 table and enables the v1 table's stream; from now on every mutation updates v1 and v2
//     in one transaction that also checks the write barrier is absent.
//   - backfill: starts once every live commit-capable peer observes dual and
//     one refresh interval has passed; copies v1 into v2 with a parallel
//     sweep (package sweep), each segment's page converged before that
//     segment's durable cursor (in v2) moves; resumes from the cursors, with
//     the segment count it recorded (backfill.go).
//   - verify: bidirectional, read-only, safe during live writes; a passing
//     verify after a complete backfill is recorded.
//   - finalize: refused while a live commit-capable peer is v1-only, the
//     backfill is incomplete, no verify passed or differences are recorded;
//     re-checks, with writes flowing, every key the change log (lake's
//     writes) or the v1 table's stream (every writer's) shows changed
//     since the verify; installs the barrier (writes pause); after a settle
//     delay re-checks what changed since; and publishes the marker in one
//     transaction that checks every barrier item is still held. Where the
//     stream cannot show the whole interval it refuses (ErrUnprovable)
//     and names a fresh verify or --full-reverify (finalize.go).
//   - repair: converges the keys the last verify or refused finalize
//     recorded; backfill --again (BackfillAgain) re-passes both tables. Both
//     write v2 only, under conditions on both copies (see repair.go).
//   - abort-finalize, rollback, retire-v1: see their doc comments.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
)

// Migrator runs the migration of one table.
type Migrator struct {
	p    dynamostore.Primitives
	reg  dynamostore.Registry
	opts Options

	crashMu sync.Mutex // serialises Options.Crash: the backfill's segments call it concurrently
}

// Options configure a Migrator. The zero value is usable.
type Options struct {
	// PageSize bounds the items of one backfill or verify page; default 100.
	PageSize int
	// Segments is the number of parallel scan segments of a verification
	// (online and under the barrier) and of a new backfill (a resumed one
	// uses the count it recorded); default 8.
	Segments int
	// MaxWCU bounds the write capacity units per second the backfill
	// causes (0: no bound), so that it does not starve live traffic.
	MaxWCU float64
	// DryRun makes the backfill scan v1 and count what it would create,
	// validate and repair, without writing anything (nor entering state
	// backfill).
	DryRun bool
	// Refresh is the stores' state refresh interval: the backfill waits this
	// long after dual before it starts; default dynamostore.DefaultRefresh.
	Refresh time.Duration
	// FullReverify makes finalize check by scanning both tables whole,
	// online and again under the barrier, instead of re-checking the keys
	// the change log and the v1 table's stream say changed since the
	// verify (the default, whose work follows what changed, not the
	// table). It proves equality when the stream cannot (see
	// ErrUnprovable); the pause grows with the table.
	FullReverify bool
	// Settle is how long finalize waits under the barrier before reading
	// the stream; nil means DefaultSettle. Zero is honoured (a legacy
	// write just before the barrier may then be missed); negative is
	// refused.
	Settle *time.Duration
	// ChangeLogOnly makes finalize check only the keys the change log
	// names, ignoring the stream. For measurement only (lake bench
	// migration): it misses every write lake did not make.
	ChangeLogOnly bool
	// GateWait is how long backfill waits for lagging peers to observe
	// dual before it refuses; default 30 s.
	GateWait time.Duration
	// Retention is how long v1 is kept after finalization before retire-v1
	// is allowed; nil means DefaultRetention. Zero is honoured: retire-v1
	// is allowed right after finalization. Negative is refused.
	Retention *time.Duration
	// Progress receives progress lines; nil discards them.
	Progress io.Writer
	// Crash, when set, is called at named points of every step; a non-nil
	// return stops the step there, as a crash would. Tests use it. Calls
	// are serialised (the backfill's segments reach their points
	// concurrently).
	Crash func(point string) error
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultRetention is how long v1 is kept after finalization by default:
// one append-operation retention horizon, so a rollback to v1-only binaries
// stays possible that long.
const DefaultRetention = 7 * 24 * time.Hour

// New returns a Migrator over d, which must be opened with layout auto.
func New(d *dynamostore.Driver, opts *Options) (*Migrator, error) {
	if d.Layout() != dynamostore.LayoutAuto {
		return nil, fmt.Errorf("%w: the migrator needs a store opened with layout auto, not %s", metastore.ErrInvalidArgument, d.Layout())
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.PageSize <= 0 {
		o.PageSize = 100
	}
	if o.PageSize > metastore.MaxListLimit {
		return nil, fmt.Errorf("%w: page size %d is over %d", metastore.ErrInvalidArgument, o.PageSize, metastore.MaxListLimit)
	}
	if o.Refresh <= 0 {
		o.Refresh = dynamostore.DefaultRefresh
	}
	if o.MaxWCU < 0 {
		return nil, fmt.Errorf("%w: max WCU must not be negative, got %v", metastore.ErrInvalidArgument, o.MaxWCU)
	}
	if o.Segments <= 0 {
		o.Segments = 8
	}
	if o.Segments > 1000 {
		return nil, fmt.Errorf("%w: %d scan segments is over 1000", metastore.ErrInvalidArgument, o.Segments)
	}
	if o.GateWait <= 0 {
		o.GateWait = 30 * time.Second
	}
	if o.Retention == nil {
		r := DefaultRetention
		o.Retention = &r
	}
	if *o.Retention < 0 {
		return nil, fmt.Errorf("%w: retention %v is negative", metastore.ErrInvalidArgument, *o.Retention)
	}
	if o.Settle == nil {
		st := DefaultSettle
		o.Settle = &st
	}
	if *o.Settle < 0 {
		return nil, fmt.Errorf("%w: settle delay %v is negative", metastore.ErrInvalidArgument, *o.Settle)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Migrator{p: d.Primitives(), reg: d.Registry(), opts: o}, nil
}

// ErrCrashed is returned when Options.Crash stopped a step.
var ErrCrashed = errors.New("lake: injected crash")

func (m *Migrator) crash(point string) error {
	if m.opts.Crash == nil {
		return nil
	}
	m.crashMu.Lock()
	defer m.crashMu.Unlock()
	if err := m.opts.Crash(point); err != nil {
		return fmt.Errorf("%w at %s: %v", ErrCrashed, point, err)
	}
	return nil
}

func (m *Migrator) now() time.Time { return m.opts.Now().UTC() }

// refused returns an error matching metastore.ErrRefused.
func refused(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{metastore.ErrRefused}, args...)...)
}

// next returns the record of the next state: epoch+1, since now, progress
// of the old state carried over unless reset.
func (m *Migrator) next(cur dynamostore.Migration, state dynamostore.State) dynamostore.Migration {
	n := cur
	n.State, n.Epoch, n.Since = state, cur.Epoch+1, m.now()
	return n
}

// Peers returns the live nodes of the registry and how many are v1-only.
func (m *Migrator) Peers(ctx context.Context) (live []dynamostore.NodeInfo, v1only int, err error) {
	nodes, err := m.reg.Nodes(ctx)
	if err != nil {
		return nil, 0, err
	}
	now := m.now()
	for _, n := range nodes {
		if !n.Live(now) {
			continue
		}
		live = append(live, n)
		if n.V1Only() {
			v1only++
		}
	}
	return live, v1only, nil
}

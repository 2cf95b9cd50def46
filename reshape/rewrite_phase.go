package reshape

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
)

// Phase is where a key rewrite stands. It lives in the state store (key
// StatePrefix()+"phase"), written only by Apply, Finalize and Rollback,
// and read by every helper (Put, Delete, Get), which trust it for
// RefreshInterval.
//
//	new ──apply──▶ live ──finalize──▶ finalizing ──▶ finalized
//	                │ ▲                   (apply repairs; finalize reruns)
//	             rollback└── apply
//	                ▼    │
//	          rolling-back ──▶ rolled-back
type Phase string

// The phases.
const (
	// PhaseNew: nothing recorded yet. Helpers already write both keys, so
	// that new writes are in both shapes before apply starts.
	PhaseNew Phase = "new"
	// PhaseLive: apply has started; both shapes are live. Helpers write
	// both keys and read the new key, falling back to the old.
	PhaseLive Phase = "live"
	// PhaseFinalizing: finalize is deleting the old items. Helpers write
	// the new key alone (deleting the old item in the same transaction)
	// and still fall back to the old key on read.
	PhaseFinalizing Phase = "finalizing"
	// PhaseFinalized: every item lives once, under its new key. Helpers
	// use the new key alone.
	PhaseFinalized Phase = "finalized"
	// PhaseRollingBack: rollback is deleting the copies. Helpers write
	// and read the old key alone, deleting a copy they meet.
	PhaseRollingBack Phase = "rolling-back"
	// PhaseRolledBack: no copy is left; the table is as it was. Apply may
	// start again.
	PhaseRolledBack Phase = "rolled-back"
)

type phaseRecord struct {
	Phase Phase     `json:"phase"`
	Since time.Time `json:"since"`
}

func (r *Rewrite) phaseKey() string  { return r.StatePrefix() + "phase" }
func (r *Rewrite) verifyKey() string { return r.StatePrefix() + "verify" }

// Phase reads the rewrite's phase from the state store (uncached).
func (r *Rewrite) Phase(ctx context.Context) (Phase, error) {
	p, _, err := r.loadPhase(ctx)
	return p, err
}

func (r *Rewrite) loadPhase(ctx context.Context) (Phase, []byte, error) {
	b, err := r.state.Get(ctx, r.phaseKey())
	if errors.Is(err, metastore.ErrNotFound) {
		return PhaseNew, nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("lake: reshape: read phase: %w", err)
	}
	var rec phaseRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Phase == "" {
		return "", nil, fmt.Errorf("lake: reshape: the phase recorded at %s is damaged: %q", r.phaseKey(), b)
	}
	return rec.Phase, b, nil
}

// transition moves the phase to `to` if it is one of from (or already
// `to`), with a compare-and-swap so that two commands cannot both move it.
// It returns the phase found before.
func (r *Rewrite) transition(ctx context.Context, to Phase, from ...Phase) (Phase, error) {
	for {
		cur, raw, err := r.loadPhase(ctx)
		if err != nil {
			return "", err
		}
		if cur == to {
			return cur, nil
		}
		if !slices.Contains(from, cur) {
			return cur, fmt.Errorf("%w: reshape: the rewrite is %s; %s needs it %v", metastore.ErrRefused, cur, to, from)
		}
		b, _ := json.Marshal(phaseRecord{Phase: to, Since: time.Now().UTC()})
		expect := metastore.ExpectAbsent()
		if raw != nil {
			expect = metastore.ExpectValue(raw)
		}
		err = r.state.CAS(ctx, r.phaseKey(), expect, b)
		if errors.Is(err, metastore.ErrConflict) {
			continue
		}
		if err != nil {
			return cur, fmt.Errorf("lake: reshape: record phase %s: %w", to, err)
		}
		r.mu.Lock()
		r.phase, r.phaseAt = to, time.Now()
		r.mu.Unlock()
		return cur, nil
	}
}

// cachedPhase is the phase as the helpers see it: read again once it is
// older than RefreshInterval.
func (r *Rewrite) cachedPhase(ctx context.Context) (Phase, error) {
	r.mu.Lock()
	p, at := r.phase, r.phaseAt
	r.mu.Unlock()
	if p != "" && time.Since(at) < r.RefreshInterval {
		return p, nil
	}
	p, err := r.Phase(ctx)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	r.phase, r.phaseAt = p, time.Now()
	r.mu.Unlock()
	return p, nil
}

// settle waits until every helper has read the phase just recorded: twice
// RefreshInterval, unless opts say otherwise.
func (r *Rewrite) settle(ctx context.Context, d time.Duration) error {
	if d == 0 {
		d = 2 * r.RefreshInterval
	}
	if d < 0 {
		return nil
	}
	return ddb.Sleep(ctx, d)
}

// VerifyRecord is the outcome of the last verify, kept in the state store:
// finalize refuses to start unless it is clean.
type VerifyRecord struct {
	Clean  bool             `json:"clean"`
	At     time.Time        `json:"at"`
	Counts map[string]int64 `json:"counts"`
}

// LastVerify returns the recorded outcome of the last verify, nil when there
// is none (never verified, or apply wrote since).
func (r *Rewrite) LastVerify(ctx context.Context) (*VerifyRecord, error) {
	b, err := r.state.Get(ctx, r.verifyKey())
	if errors.Is(err, metastore.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lake: reshape: read verify record: %w", err)
	}
	var v VerifyRecord
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("lake: reshape: the verify record at %s is damaged: %v", r.verifyKey(), err)
	}
	return &v, nil
}

func (r *Rewrite) recordVerify(ctx context.Context, v VerifyRecord) error {
	b, _ := json.Marshal(v)
	if err := r.state.Put(ctx, r.verifyKey(), b); err != nil {
		return fmt.Errorf("lake: reshape: record verify: %w", err)
	}
	return nil
}

// forgetVerify drops the verify record: apply wrote, so the table is not the
// one verified.
func (r *Rewrite) forgetVerify(ctx context.Context) error {
	b, err := r.state.Get(ctx, r.verifyKey())
	if errors.Is(err, metastore.ErrNotFound) {
		return nil
	}
	if err == nil {
		err = r.state.Delete(ctx, r.verifyKey(), b)
	}
	if err != nil && !errors.Is(err, metastore.ErrNotFound) && !errors.Is(err, metastore.ErrConflict) {
		return fmt.Errorf("lake: reshape: forget verify record: %w", err)
	}
	return nil
}

func refusedf(format string, args ...any) error {
	return fmt.Errorf("%w: reshape: "+format, append([]any{metastore.ErrRefused}, args...)...)
}

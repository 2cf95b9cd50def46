package reshape

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/sweep"
)

// ErrRewriteIncomplete is the error of a finalize or rollback that could not
// finish (items skipped or contended), and of a verify that found copies
// missing, different or orphaned. It matches metastore.ErrRefused.
var ErrRewriteIncomplete = fmt.Errorf("%w: reshape: the key rewrite is not complete", metastore.ErrRefused)

// EndResult is what Finalize or Rollback did.
type EndResult struct {
	// Passes are the summaries of the sweeps made, in order.
	Passes []sweep.Summary
	// Phase is the phase recorded at the end.
	Phase Phase
}

// Counts adds up the counts of every pass.
func (e EndResult) Counts() map[string]int64 {
	out := map[string]int64{}
	for _, p := range e.Passes {
		for k, v := range p.Counts {
			out[k] += v
		}
	}
	return out
}

// Finalize deletes the old items, the last step of a key rewrite. It
// refuses unless the last verify recorded every copy equal (VerifyRecord
// clean). It records the phase finalizing (helpers then write the new key
// alone and delete the old item as they write), waits Settle, and sweeps:
// per old item one TransactWriteItems deleting it, conditioned on it being
// unchanged since read, and removing the marker from its copy, conditioned
// on the copy being equal to it; an orphan is removed as apply does. An old
// item whose copy is missing or different is skipped (an old writer changed
// it after verify): finalize then stops with ErrRewriteIncomplete, and
// apply, verify and finalize again converge (the verify record is dropped).
// It sweeps again until a whole pass wrote nothing (see endPasses), then
// records finalized: helpers use the new key alone. Killed at any point and
// run again, it resumes.
func (r *Rewrite) Finalize(ctx context.Context, o RewriteOptions) (EndResult, error) {
	cur, err := r.Phase(ctx)
	if err != nil {
		return EndResult{}, err
	}
	if cur == PhaseFinalized {
		return EndResult{Phase: cur}, nil
	}
	v, err := r.LastVerify(ctx)
	if err != nil {
		return EndResult{}, err
	}
	if v == nil || !v.Clean {
		return EndResult{Phase: cur}, refusedf("finalize needs a clean verify first (every copy equal, no orphan), recorded since the last apply that wrote: run lake reshape verify")
	}
	if o.DryRun {
		sum, err := r.pass(ctx, "finalize", o, r.finalizeItem, nil)
		return EndResult{Passes: []sweep.Summary{sum}, Phase: cur}, err
	}
	if _, err := r.transition(ctx, PhaseFinalizing, PhaseLive); err != nil {
		return EndResult{Phase: cur}, err
	}
	return r.endPasses(ctx, o, "finalize", PhaseFinalized, PhaseFinalizing, cur == PhaseFinalizing, r.finalizeItem)
}

// Rollback deletes the copies, before finalize: it records rolling-back
// (helpers then write and read the old key alone, deleting a copy they
// meet), waits Settle, and sweeps, deleting each copy in a transaction
// conditioned on the copy and its old item being as read. It sweeps again
// until a whole pass wrote nothing, then records rolled-back: the
// table is as it was before apply. It refuses once finalize has begun (the
// old items of the moved ones are gone).
func (r *Rewrite) Rollback(ctx context.Context, o RewriteOptions) (EndResult, error) {
	cur, err := r.Phase(ctx)
	if err != nil {
		return EndResult{}, err
	}
	switch cur {
	case PhaseRolledBack:
		return EndResult{Phase: cur}, nil
	case PhaseFinalizing, PhaseFinalized:
		return EndResult{Phase: cur}, refusedf("the rewrite is %s: old items have been deleted, so it cannot be rolled back; run finalize to finish it", cur)
	}
	if o.DryRun {
		sum, err := r.pass(ctx, "rollback", o, r.rollbackItem, nil)
		return EndResult{Passes: []sweep.Summary{sum}, Phase: cur}, err
	}
	if _, err := r.transition(ctx, PhaseRollingBack, PhaseNew, PhaseLive); err != nil {
		return EndResult{Phase: cur}, err
	}
	if err := r.forgetVerify(ctx); err != nil {
		return EndResult{Phase: PhaseRollingBack}, err
	}
	return r.endPasses(ctx, o, "rollback", PhaseRolledBack, PhaseRollingBack, cur == PhaseRollingBack, r.rollbackItem)
}

// endPasses sweeps with fn until a whole pass wrote nothing and met no item
// left undone, then records `done`. Because a pass may be resumed by
// another run after a kill, "wrote nothing" is recorded durably: before its
// first write, and on meeting an item it could not finish or that went
// meanwhile, each pass records StatePrefix()+name+"/dirty" (a run killed
// right after has recorded it already), and a pass starting from the
// beginning of the table clears it. When resumed (the phase was `during`
// already), a pass that a killed run completed still counts: if it ended
// clean, this run records `done` without sweeping again.
func (r *Rewrite) endPasses(ctx context.Context, o RewriteOptions, name string, done, during Phase, resumed bool, fn itemFunc) (EndResult, error) {
	res := EndResult{Phase: during}
	if err := r.settle(ctx, o.Settle); err != nil {
		return res, err
	}
	passes := o.MaxPasses
	if passes <= 0 {
		passes = DefaultMaxPasses
	}
	dirtyKey := r.StatePrefix() + name + "/dirty"
	var dirty atomic.Bool // recorded by this pass already
	markDirty := func(ctx context.Context) error {
		if dirty.Load() {
			return nil
		}
		if err := r.state.Put(ctx, dirtyKey, []byte("1")); err != nil {
			return fmt.Errorf("lake: reshape: record %s: %w", dirtyKey, err)
		}
		dirty.Store(true)
		return nil
	}
	marked := func(ctx context.Context, item map[string]types.AttributeValue, spend Spender, dry bool) (string, int, error) {
		outcome, retries, err := fn(ctx, item, func(ctx context.Context, units float64) error {
			if err := markDirty(ctx); err != nil {
				return err
			}
			return spend(ctx, units)
		}, dry)
		if err == nil && !dry && unfinished(outcome) {
			err = markDirty(ctx)
		}
		return outcome, retries, err
	}
	fresh := func(ctx context.Context) error {
		dirty.Store(false)
		b, err := r.state.Get(ctx, dirtyKey)
		if errors.Is(err, metastore.ErrNotFound) {
			return nil
		}
		if err == nil {
			err = r.state.Delete(ctx, dirtyKey, b)
		}
		return err
	}
	clean := func(ctx context.Context) (bool, error) {
		_, err := r.state.Get(ctx, dirtyKey)
		if errors.Is(err, metastore.ErrNotFound) {
			return true, nil
		}
		return false, err
	}
	finish := func(ctx context.Context) (EndResult, error) {
		if err := fresh(ctx); err != nil {
			return res, err
		}
		// The next end of another apply sweeps from the beginning.
		if err := r.checkpoints(name).Reset(ctx); err != nil {
			return res, err
		}
		if _, err := r.transition(ctx, done, during); err != nil {
			return res, err
		}
		res.Phase = done
		return res, nil
	}
	// A run killed after the last page of a clean pass left the proof.
	st, err := r.checkpoints(name).Load(ctx)
	if err != nil {
		return res, err
	}
	if resumed && st != nil && st.Done() {
		ok, err := clean(ctx)
		if err != nil {
			return res, err
		}
		if ok {
			return finish(ctx)
		}
	}
	for range passes {
		dirty.Store(false)
		sum, err := r.pass(ctx, name, o, marked, fresh)
		res.Passes = append(res.Passes, sum)
		if err != nil {
			return res, err
		}
		c := sum.Counts
		if c[OutSkipped]+c[OutContended]+c[OutCollision]+c[OutNotDerivable] > 0 {
			// The verify no longer holds: the next finalize waits for a
			// new one, after apply has repaired what was skipped.
			if err := r.forgetVerify(ctx); err != nil {
				return res, err
			}
			return res, fmt.Errorf("%w: %s left items undone (skipped %d, contended %d, collision %d, not derivable %d): run apply, verify and %s again",
				ErrRewriteIncomplete, name, c[OutSkipped], c[OutContended], c[OutCollision], c[OutNotDerivable], name)
		}
		ok, err := clean(ctx)
		if err != nil {
			return res, err
		}
		if ok && c[OutGone] == 0 { // a gone item may leave an orphan behind the cursor
			return finish(ctx)
		}
	}
	return res, fmt.Errorf("%w: %s: %d passes and writers still leave work: are all writers using the helpers?", ErrRewriteIncomplete, name, passes)
}

// unfinished reports outcomes that keep a pass from proving the sweep done:
// an item left undone, or one that went while the pass judged it (it may
// leave an orphan behind the cursor).
func unfinished(outcome string) bool {
	switch outcome {
	case OutSkipped, OutContended, OutCollision, OutNotDerivable, OutGone:
		return true
	}
	return false
}

// finalizeItem moves one old item: deletes it and unmarks its copy.
func (r *Rewrite) finalizeItem(ctx context.Context, item map[string]types.AttributeValue, spend Spender, dry bool) (string, int, error) {
	if !r.isOld(item) {
		if oldKey, ok := r.isCopy(item); ok {
			return r.removeOrphan(ctx, item, oldKey, spend, dry)
		}
		return OutOther, 0, nil
	}
	old := item
	oldKey := r.OldKey(old)
	newKey, err := r.NewKey(old)
	if err != nil {
		return OutNotDerivable, 0, nil
	}
	rereads := 0 // fresh reads of old after a mismatch; live dual-writes can fall between two reads
	for attempt := 0; ; attempt++ {
		if attempt >= r.attempts() {
			return OutContended, attempt, nil
		}
		cp, err := r.read(ctx, newKey)
		if err != nil {
			return "", attempt, err
		}
		from, ok := r.isCopy(cp)
		if cp == nil || !ok || !r.sameKey(from, oldKey) || !r.sameContent(old, cp) {
			if rereads == 3 {
				return OutSkipped, attempt, nil
			}
			// The old item may be as scanned, before a dual-write
			// changed both, or a dual-write fell between the two
			// reads: judge again on fresh reads.
			rereads++
			if err := ddb.Backoff(ctx, rereads); err != nil {
				return "", attempt, err
			}
			if old, err = r.read(ctx, oldKey); err != nil {
				return "", attempt, err
			}
			if old == nil {
				return OutGone, attempt, nil
			}
			if !r.isOld(old) {
				return OutOther, attempt, nil
			}
			if newKey, err = r.NewKey(old); err != nil {
				return OutNotDerivable, attempt, nil
			}
			attempt--
			continue
		}
		if dry {
			return OutMoved, attempt, nil
		}
		_, err = r.txn().del(oldKey, old).unmark(newKey, cp).run(ctx, spend)
		if err == nil {
			return OutMoved, attempt, nil
		}
		if !errors.Is(err, errRaced) {
			return "", attempt, err
		}
		if err := ddb.Backoff(ctx, attempt); err != nil {
			return "", attempt, err
		}
		if old, err = r.read(ctx, oldKey); err != nil {
			return "", attempt, err
		}
		if old == nil {
			return OutGone, attempt + 1, nil
		}
		if !r.isOld(old) {
			return OutOther, attempt + 1, nil
		}
		if newKey, err = r.NewKey(old); err != nil {
			return OutNotDerivable, attempt + 1, nil
		}
	}
}

// rollbackItem deletes one copy, conditioned on it and its old item being
// as read.
func (r *Rewrite) rollbackItem(ctx context.Context, item map[string]types.AttributeValue, spend Spender, dry bool) (string, int, error) {
	oldKey, ok := r.isCopy(item)
	if !ok {
		return OutOther, 0, nil
	}
	return r.deleteCopy(ctx, item, oldKey, spend, dry, nil, OutRemoved)
}

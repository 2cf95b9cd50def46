package reshape

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/sweep"
)

// Outcomes of a rewrite's sweeps, as counted in their summaries.
const (
	OutCopied        = "copied"         // an old item copied to its new key
	OutRepaired      = "repaired"       // a copy rewritten from its changed old item
	OutEqual         = "equal"          // the copy already equal
	OutCollision     = "collision"      // the new key holds an item the rewrite did not copy from this one
	OutNotDerivable  = "not-derivable"  // the new key cannot be derived
	OutOrphanRemoved = "orphan-removed" // a copy whose old item is gone, deleted while it still was
	OutCopy          = "copy"           // a copy whose old item exists (handled at the old item)
	OutGone          = "gone"           // deleted meanwhile: nothing written
	OutContended     = "contended"      // kept changing for MaxAttempts tries: left for the next pass
	OutOther         = "other"          // not covered, not a copy
	OutMoved         = "moved"          // finalize: old item deleted, copy unmarked
	OutSkipped       = "skipped"        // finalize: copy missing or different: not deleted
	OutRemoved       = "removed"        // rollback: a copy deleted
	OutFailed        = "failed"         // DynamoDB refused the copy for this item alone (e.g. over 400 KB)
	OutMarkerClash   = "marker-clash"   // a covered item already holds the marker attribute, not as a copy
)

// ApplyRewrite copies every covered item to its new key, on the sweep
// engine: per old item one TransactWriteItems holding a ConditionCheck that
// the old item still holds what was read and a Put of the copy conditioned
// on the new key being absent (or, for a repair, holding the stale copy
// read). A copy whose old item is gone (an orphan: an old writer deleted
// it) is deleted in a transaction checking the old item is still absent,
// so that a re-created item keeps its copy. An item at the new key that the
// rewrite did not copy from this old item is never overwritten: it is
// counted as a collision. Apply records the phase live (it refuses once
// finalized or while rolling back) and forgets the last verify when it
// writes anything.
func (r *Rewrite) Apply(ctx context.Context, o RewriteOptions) (sweep.Summary, error) {
	if o.DryRun {
		p, err := r.Phase(ctx)
		if err != nil {
			return sweep.Summary{}, err
		}
		if err := applicable(p); err != nil {
			return sweep.Summary{}, err
		}
	} else {
		if _, err := r.transition(ctx, PhaseLive, PhaseNew, PhaseRolledBack); err != nil {
			cur, _ := r.Phase(ctx)
			if cur != PhaseFinalizing { // apply repairs copies while finalizing
				return sweep.Summary{}, applicableOr(cur, err)
			}
		}
	}
	r.problems.reset()
	sum, err := r.pass(ctx, "apply", o, r.applyItem, nil)
	if !o.DryRun && sum.Counts[OutCopied]+sum.Counts[OutRepaired]+sum.Counts[OutOrphanRemoved] > 0 {
		if ferr := r.forgetVerify(context.WithoutCancel(ctx)); ferr != nil && err == nil {
			err = ferr
		}
	}
	if err == nil {
		err = r.problems.err(sum, OutNotDerivable, OutFailed, OutMarkerClash)
	}
	return sum, err
}

func applicable(p Phase) error { return applicableOr(p, nil) }

func applicableOr(p Phase, err error) error {
	switch p {
	case PhaseFinalized:
		return refusedf("the rewrite is finalized: every item lives under its new key; there is nothing to apply")
	case PhaseRollingBack:
		return refusedf("a rollback is under way: run rollback again to finish it before apply")
	}
	return err
}

// applyItem brings one scanned item to its applied state.
func (r *Rewrite) applyItem(ctx context.Context, item map[string]types.AttributeValue, spend Spender, dry bool) (string, int, error) {
	switch {
	case r.isOld(item):
		return r.copyItem(ctx, item, spend, dry)
	case r.markerClash(item):
		return "", 0, &itemProblem{OutMarkerClash, "it holds the attribute " + r.marker() + ", which this rewrite uses to mark its copies: choose another rewrite.marker"}
	default:
		if oldKey, ok := r.isCopy(item); ok {
			return r.removeOrphan(ctx, item, oldKey, spend, dry)
		}
		return OutOther, 0, nil
	}
}

// copyItem copies (or repairs the copy of) one old item.
func (r *Rewrite) copyItem(ctx context.Context, old map[string]types.AttributeValue, spend Spender, dry bool) (string, int, error) {
	newKey, err := r.NewKey(old)
	if err != nil {
		return "", 0, &itemProblem{OutNotDerivable, err.Error()}
	}
	oldKey := r.OldKey(old)
	for attempt := 0; ; attempt++ {
		if attempt >= r.attempts() {
			return OutContended, attempt, nil
		}
		cp, err := r.read(ctx, newKey)
		if err != nil {
			return "", attempt, err
		}
		outcome := OutCopied
		if cp != nil {
			from, ok := r.isCopy(cp)
			switch {
			case !ok || !r.sameKey(from, oldKey):
				return OutCollision, attempt, nil
			case r.sameContent(old, cp):
				return OutEqual, attempt, nil
			}
			outcome = OutRepaired
		}
		if dry {
			return outcome, attempt, nil
		}
		_, err = r.txn().check(oldKey, old).put(r.copyOf(old, newKey, true), cp).run(ctx, spend)
		if err == nil {
			return outcome, attempt, nil
		}
		if reason, ok := itemRefused(err); ok {
			return "", attempt, &itemProblem{OutFailed, reason}
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
		if k, err := r.NewKey(old); err != nil {
			return "", attempt + 1, &itemProblem{OutNotDerivable, err.Error()}
		} else {
			// A changed source moves the new key with it; the copy left
			// at the former one is an orphan, removed at its own visit.
			newKey = k
		}
	}
}

// removeOrphan deletes an orphan: a copy whose old item is absent (or no
// longer maps to this copy's key: an old writer changed a source of the new
// key), in a transaction checking that the old item is still as read, absent
// or so changed. A re-created old item thus keeps its copy: the fix of issue
// 9's extra copies, built in from the start.
func (r *Rewrite) removeOrphan(ctx context.Context, cp, oldKey map[string]types.AttributeValue, spend Spender, dry bool) (string, int, error) {
	cpKey := r.OldKey(cp)
	// An old item that maps to this copy's key again is its source: keep.
	isSource := func(old map[string]types.AttributeValue) bool {
		if old == nil || !r.isOld(old) {
			return false
		}
		k, err := r.NewKey(old)
		return err == nil && r.sameKey(k, cpKey)
	}
	return r.deleteCopy(ctx, cp, oldKey, spend, dry, isSource, OutOrphanRemoved)
}

// deleteCopy deletes the copy cp of the old item at oldKey in a transaction
// checking that the old item is still as read, retrying races with backoff;
// keep (if not nil) spares the copy for the old item as read (OutCopy). It
// returns done once deleted; OutGone or OutOther when the copy went or
// stopped being this old item's copy meanwhile; OutContended after too many
// races. Apply's orphans and rollback share it.
func (r *Rewrite) deleteCopy(ctx context.Context, cp, oldKey map[string]types.AttributeValue, spend Spender, dry bool,
	keep func(old map[string]types.AttributeValue) bool, done string) (string, int, error) {
	cpKey := r.OldKey(cp)
	for attempt := 0; ; attempt++ {
		if attempt >= r.attempts() {
			return OutContended, attempt, nil
		}
		old, err := r.read(ctx, oldKey)
		if err != nil {
			return "", attempt, err
		}
		if keep != nil && keep(old) {
			return OutCopy, attempt, nil
		}
		if dry {
			return done, attempt, nil
		}
		_, err = r.txn().check(oldKey, old).del(cpKey, cp).run(ctx, spend)
		if err == nil {
			return done, attempt, nil
		}
		if !errors.Is(err, errRaced) {
			return "", attempt, err
		}
		if err := ddb.Backoff(ctx, attempt); err != nil {
			return "", attempt, err
		}
		if cp, err = r.read(ctx, cpKey); err != nil {
			return "", attempt, err
		}
		if cp == nil {
			return OutGone, attempt + 1, nil
		}
		if k, ok := r.isCopy(cp); !ok || !r.sameKey(k, oldKey) {
			return OutOther, attempt + 1, nil
		}
	}
}

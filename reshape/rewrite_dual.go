package reshape

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
)

// Put is the dual-write helper: it writes item (given in the old shape: its
// old key and the attributes the new key is derived from) as the phase
// says, in one TransactWriteItems conditioned on both keys' items being as
// just read (strongly consistent), so that the two copies never diverge
// through it; a failed condition re-reads both and decides again.
//
//   - new, live: the old item and its marked copy, both.
//   - finalizing, finalized, or the copy already moved (unmarked): the new
//     key alone, unmarked, deleting the old item if it exists.
//   - rolling-back, rolled-back: the old key alone, deleting the copy if
//     it exists.
//
// An item the spec does not cover is put as is. An item at the new key that
// is the copy of another old item is an error matching metastore.ErrConflict
// (the new key collides); a covered item whose new key cannot be derived is
// an error matching metastore.ErrInvalidArgument.
func (r *Rewrite) Put(ctx context.Context, item map[string]types.AttributeValue) error {
	return r.put(ctx, nil, item)
}

// Replace is Put for an edit that may change an attribute the new key is
// derived from (a key change in the new shape): before is the item as the
// application last wrote it (at least its old key and the attributes the
// new key reads), item the new version, under the same old key. The item at
// before's new key (the marked copy, or the moved item once finalize has
// moved it) is deleted in the same transaction as the write. Put does that
// too while the old item exists (it finds the former new key from it), but
// only Replace can once the old item is gone.
func (r *Rewrite) Replace(ctx context.Context, before, item map[string]types.AttributeValue) error {
	if !r.sameKey(r.OldKey(before), r.OldKey(item)) {
		return fmt.Errorf("%w: reshape: replace: %s and %s are not one item", metastore.ErrInvalidArgument, KeyString(r.OldKey(before)), KeyString(r.OldKey(item)))
	}
	return r.put(ctx, before, item)
}

func (r *Rewrite) put(ctx context.Context, before, item map[string]types.AttributeValue) error {
	if !r.isOld(item) {
		if _, err := r.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.spec.Table), Item: item}); err != nil {
			return fmt.Errorf("lake: reshape: put item %s: %w", KeyString(r.OldKey(item)), err)
		}
		return nil
	}
	oldKey := r.OldKey(item)
	newKey, err := r.NewKey(item)
	if err != nil {
		return fmt.Errorf("%w: reshape: item %s: %v", metastore.ErrInvalidArgument, KeyString(oldKey), err)
	}
	return r.retry(ctx, "put", oldKey, func() error {
		phase, err := r.cachedPhase(ctx)
		if err != nil {
			return err
		}
		old, cp, err := r.readPair(ctx, oldKey, newKey)
		if err != nil {
			return err
		}
		from, marked := r.isCopy(cp)
		if marked && !r.sameKey(from, oldKey) {
			return fmt.Errorf("%w: reshape: the new key %s of %s holds the copy of %s", metastore.ErrConflict, KeyString(newKey), KeyString(oldKey), KeyString(from))
		}
		t := r.txn()
		// A write that changes a source of the new key leaves the copy
		// at the former new key behind: delete it in the same
		// transaction, so that no stale copy outlives the write.
		if err := r.dropFormer(ctx, t, old, before, newKey); err != nil {
			return err
		}
		switch {
		case phase == PhaseRollingBack || phase == PhaseRolledBack:
			t.put(item, old)
			if cp != nil {
				t.del(newKey, cp)
			}
		case phase == PhaseFinalizing || phase == PhaseFinalized || (cp != nil && !marked):
			t.put(r.copyOf(item, newKey, false), cp)
			if old != nil {
				t.del(oldKey, old)
			}
		default:
			t.put(item, old).put(r.copyOf(item, newKey, true), cp)
		}
		_, err = t.run(ctx, nil)
		return err
	})
}

// dropFormer adds to t the delete of the item's former new-key item when
// its new key is changing to newKey: the marked copy at old's own new key,
// and the copy or moved item at before's new key (before may be nil).
func (r *Rewrite) dropFormer(ctx context.Context, t *txn, old, before, newKey map[string]types.AttributeValue) error {
	var oldKey map[string]types.AttributeValue
	var formers []map[string]types.AttributeValue
	var movable []bool // an unmarked item there is this item, moved
	if old != nil && r.isOld(old) {
		oldKey = r.OldKey(old)
		if k, err := r.NewKey(old); err == nil {
			formers, movable = append(formers, k), append(movable, false)
		}
	}
	if before != nil {
		oldKey = r.OldKey(before)
		if k, err := r.NewKey(before); err == nil {
			formers, movable = append(formers, k), append(movable, true)
		}
	}
	for i, k := range formers {
		if r.sameKey(k, newKey) || (i == 1 && len(formers) == 2 && r.sameKey(k, formers[0])) {
			continue
		}
		fc, err := r.read(ctx, k)
		if err != nil {
			return err
		}
		if fc == nil {
			// Still absent when the write lands: apply may copy the
			// old item as read to this key meanwhile, and that copy
			// would outlive the write that moved the key away.
			t.check(k, nil)
			continue
		}
		from, marked := r.isCopy(fc)
		if (marked && r.sameKey(from, oldKey)) || (!marked && movable[i]) {
			t.del(k, fc)
		}
	}
	return nil
}

// Delete is the dual-write helper's delete: it deletes the item at ref's
// old key and at its new key (ref holds the old key and the attributes the
// new key is derived from), whichever exist, in one TransactWriteItems
// conditioned on both being as just read (an absent copy still absent, so
// that apply cannot copy the item in between). Deleting an item that exists
// under neither key is not an error.
func (r *Rewrite) Delete(ctx context.Context, ref map[string]types.AttributeValue) error {
	oldKey := r.OldKey(ref)
	newKey, err := r.NewKey(ref)
	if err != nil {
		return fmt.Errorf("%w: reshape: item %s: %v", metastore.ErrInvalidArgument, KeyString(oldKey), err)
	}
	return r.retry(ctx, "delete", oldKey, func() error {
		old, cp, err := r.readPair(ctx, oldKey, newKey)
		if err != nil {
			return err
		}
		t := r.txn()
		if err := r.dropFormer(ctx, t, old, nil, newKey); err != nil {
			return err
		}
		if old != nil {
			t.del(oldKey, old)
		}
		switch from, marked := r.isCopy(cp); {
		case marked && !r.sameKey(from, oldKey):
			// another item's copy: not this item's to delete
		case cp != nil:
			t.del(newKey, cp)
		case old != nil:
			// No copy read: it must still be absent when the delete
			// lands, or apply's copy of the old item (made between
			// the reads and this transaction) would outlive it and
			// the dual-read would find the deleted item again.
			t.check(newKey, nil)
		}
		_, err = t.run(ctx, nil)
		return err
	})
}

// Get is the dual-read helper: it returns the item ref names (ref holds
// the old key and the attributes the new key is derived from), without the
// rewrite's marker, or an error matching metastore.ErrNotFound. While the
// rewrite is not finalized it reads the new key, falls back to the old, and
// reads the new key once more when both missed: an item moved by finalize
// between the first two reads is then found, not missed. Finalized, it
// reads the new key alone; rolling back or rolled back, the old key alone.
func (r *Rewrite) Get(ctx context.Context, ref map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	oldKey := r.OldKey(ref)
	newKey, err := r.NewKey(ref)
	if err != nil {
		return nil, fmt.Errorf("%w: reshape: item %s: %v", metastore.ErrInvalidArgument, KeyString(oldKey), err)
	}
	phase, err := r.cachedPhase(ctx)
	if err != nil {
		return nil, err
	}
	var order []map[string]types.AttributeValue
	switch phase {
	case PhaseFinalized:
		order = []map[string]types.AttributeValue{newKey}
	case PhaseRollingBack, PhaseRolledBack:
		order = []map[string]types.AttributeValue{oldKey}
	default:
		order = []map[string]types.AttributeValue{newKey, oldKey, newKey}
	}
	for _, k := range order {
		item, err := r.read(ctx, k)
		if err != nil {
			return nil, err
		}
		if item == nil {
			continue
		}
		if from, marked := r.isCopy(item); marked && !r.sameKey(from, oldKey) {
			continue // another item's copy
		}
		out := maps.Clone(item)
		delete(out, r.marker())
		return out, nil
	}
	return nil, fmt.Errorf("%w: reshape: item %s", metastore.ErrNotFound, KeyString(oldKey))
}

// retry runs one read-decide-write attempt until it is not raced, at most
// MaxAttempts times, backing off between attempts.
func (r *Rewrite) retry(ctx context.Context, op string, key map[string]types.AttributeValue, f func() error) error {
	for attempt := 0; attempt < r.attempts()*4; attempt++ {
		err := f()
		if !errors.Is(err, errRaced) {
			return err
		}
		if err := ddb.Backoff(ctx, attempt); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: reshape: %s %s: the item kept changing for %d tries", metastore.ErrConflict, op, KeyString(key), r.attempts()*4)
}

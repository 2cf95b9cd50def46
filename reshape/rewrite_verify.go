package reshape

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/sweep"
)

// Verify outcomes of a key rewrite, beside the sweep outcomes.
const (
	OutMissing   = "missing"   // an old item without its copy
	OutDifferent = "different" // a copy that differs from its old item
	OutOrphan    = "orphan"    // a copy whose old item is gone (or maps elsewhere)
)

// RewriteReport is what VerifyRewrite found.
type RewriteReport struct {
	Table string `json:"table"`
	Phase Phase  `json:"phase"`
	// Counts per outcome: equal, missing, different, orphan, collision,
	// not-derivable, copy (a copy whose old item exists), other.
	Counts  map[string]int64 `json:"counts"`
	Scanned int64            `json:"scanned"`
	// Problems lists up to List items per problem outcome.
	Problems []ItemRef `json:"problems"`
	// Clean says the sweep covered the whole table and found every old
	// item's copy equal, no orphan, no collision, nothing not derivable.
	Clean bool `json:"clean"`
}

// Err returns ErrRewriteIncomplete unless the report is clean.
func (rep *RewriteReport) Err() error {
	if rep.Clean {
		return nil
	}
	return ErrRewriteIncomplete
}

// VerifyRewrite paginates the whole table (strongly consistent) and checks
// each old item against the item at its new key (missing, different, a
// collision) and each copy against its old item (an orphan when the old
// item is gone, or now maps to another key). A discrepancy is read again a
// few times before it is reported, because live writers move both items
// between the two reads. The outcome is recorded in the state store: clean
// or not, finalize reads it. In phase finalized, old items are what is
// left to report, and copies are expected unmarked.
func (r *Rewrite) VerifyRewrite(ctx context.Context, o VerifyOptions) (*RewriteReport, error) {
	phase, err := r.Phase(ctx)
	if err != nil {
		return nil, err
	}
	rep := &RewriteReport{Table: r.spec.Table, Phase: phase}
	list := o.List
	if list <= 0 {
		list = DefaultList
	}
	var mu sync.Mutex
	listed := map[string]int{}
	note := func(key map[string]types.AttributeValue, state, detail string) {
		mu.Lock()
		defer mu.Unlock()
		if listed[state] < list {
			listed[state]++
			rep.Problems = append(rep.Problems, ItemRef{Key: KeyString(key), State: state, Detail: detail})
		}
	}
	sum, err := sweep.Run(ctx, r.api, sweep.Options{
		Table: r.spec.Table, Segments: o.Segments, PageSize: o.PageSize, ConsistentRead: true, Progress: o.Progress,
	}, func(ctx context.Context, p *sweep.Page) error {
		return eachItem(ctx, p, DefaultWorkers, func(item map[string]types.AttributeValue) error {
			out, detail, err := r.verifyItem(ctx, item)
			if err != nil {
				return err
			}
			p.Count(out, 1)
			switch out {
			case OutEqual, OutCopy, OutOther, OutGone:
			default:
				note(r.OldKey(item), out, detail)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	rep.Counts, rep.Scanned = sum.Counts, sum.Scanned
	c := rep.Counts
	rep.Clean = sum.Complete && c[OutMissing]+c[OutDifferent]+c[OutOrphan]+c[OutCollision]+c[OutNotDerivable]+c[OutMarkerClash] == 0
	if err := r.recordVerify(ctx, VerifyRecord{Clean: rep.Clean, At: time.Now().UTC(), Counts: c}); err != nil {
		return rep, err
	}
	return rep, nil
}

// verifyItem classifies one scanned item, reading again what looks wrong.
// A second look reads the item and its partner (its copy, or its old item)
// at one instant, with TransactGetItems: a dual-write changes both in one
// transaction, so two separate reads can fall on either side of it, and a
// writer that edits the same item without pause made them do so three
// times running.
func (r *Rewrite) verifyItem(ctx context.Context, item map[string]types.AttributeValue) (string, string, error) {
	const reads = 3
	key := r.OldKey(item)
	out, detail, err := r.classifyPair(ctx, item, nil)
	for attempt := 1; attempt < reads && err == nil && suspect(out); attempt++ {
		if err := ddb.Backoff(ctx, attempt+2); err != nil {
			return "", "", err
		}
		next, partner, rerr := r.readAtOnce(ctx, key, item)
		if errors.Is(rerr, errRaced) {
			continue // a transaction held the pair: look again
		} else if rerr != nil {
			return "", "", rerr
		}
		if item = next; item == nil {
			return OutGone, "", nil
		}
		out, detail, err = r.classifyPair(ctx, item, partner)
	}
	return out, detail, err
}

// suspect says whether outcome out may be a live write between two reads.
func suspect(out string) bool {
	return out == OutMissing || out == OutDifferent || out == OutOrphan
}

// pairRead is an item's partner as read together with it: the item at
// key, nil when absent.
type pairRead struct {
	key  map[string]types.AttributeValue
	item map[string]types.AttributeValue
}

// partnerKey is the key of item's partner: an old item's new key, a copy's
// old key. ok is false for an item that is neither, or whose new key cannot
// be derived (classifyPair judges those without a partner).
func (r *Rewrite) partnerKey(item map[string]types.AttributeValue) (map[string]types.AttributeValue, bool) {
	if r.markerClash(item) {
		return nil, false
	}
	if r.isOld(item) {
		k, err := r.NewKey(item)
		return k, err == nil
	}
	return r.isCopy(item)
}

// readAtOnce reads the item at key and the partner that prev (its earlier
// value) named, in one TransactGetItems. The partner is nil when prev
// names none, or when the item read now names another one (it was
// rewritten meanwhile): classifyPair then reads that one itself.
func (r *Rewrite) readAtOnce(ctx context.Context, key, prev map[string]types.AttributeValue) (map[string]types.AttributeValue, *pairRead, error) {
	pk, ok := r.partnerKey(prev)
	if !ok {
		item, err := r.read(ctx, key)
		return item, nil, err
	}
	out, err := r.api.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{
		{Get: &types.Get{TableName: aws.String(r.spec.Table), Key: key}},
		{Get: &types.Get{TableName: aws.String(r.spec.Table), Key: pk}},
	}})
	if err != nil {
		var tce *types.TransactionCanceledException
		var tcf *types.TransactionConflictException
		if errors.As(err, &tce) || errors.As(err, &tcf) {
			return nil, nil, errRaced
		}
		return nil, nil, fmt.Errorf("lake: reshape: read item %s with %s: %w", KeyString(key), KeyString(pk), err)
	}
	if len(out.Responses) != 2 {
		return nil, nil, fmt.Errorf("lake: reshape: read item %s with %s: %d responses to 2 reads", KeyString(key), KeyString(pk), len(out.Responses))
	}
	item := nonEmpty(out.Responses[0].Item)
	if item == nil {
		return nil, nil, nil
	}
	if now, ok := r.partnerKey(item); !ok || !r.sameKey(now, pk) {
		return item, nil, nil
	}
	return item, &pairRead{key: pk, item: nonEmpty(out.Responses[1].Item)}, nil
}

// nonEmpty is item, or nil when it holds nothing (absent).
func nonEmpty(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if len(item) == 0 {
		return nil
	}
	return item
}

// classifyPair reads the other half of item's pair (from partner when it
// holds that half, read at the same instant as item) and says how they
// stand.
func (r *Rewrite) classifyPair(ctx context.Context, item map[string]types.AttributeValue, partner *pairRead) (string, string, error) {
	readPartner := func(key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
		if partner != nil && r.sameKey(partner.key, key) {
			return partner.item, nil
		}
		return r.read(ctx, key)
	}
	if r.markerClash(item) {
		return OutMarkerClash, "holds the attribute " + r.marker() + " without being a copy of this rewrite: it is never moved", nil
	}
	if r.isOld(item) {
		newKey, err := r.NewKey(item)
		if err != nil {
			return OutNotDerivable, err.Error(), nil
		}
		cp, err := readPartner(newKey)
		if err != nil {
			return "", "", err
		}
		if cp == nil {
			return OutMissing, "no item at " + KeyString(newKey), nil
		}
		from, ok := r.isCopy(cp)
		switch {
		case !ok || !r.sameKey(from, r.OldKey(item)):
			return OutCollision, KeyString(newKey) + " holds an item not copied from this one", nil
		case !r.sameContent(item, cp):
			return OutDifferent, "the copy at " + KeyString(newKey) + " differs", nil
		}
		return OutEqual, "", nil
	}
	oldKey, ok := r.isCopy(item)
	if !ok {
		return OutOther, "", nil
	}
	old, err := readPartner(oldKey)
	if err != nil {
		return "", "", err
	}
	if old == nil {
		return OutOrphan, "its old item " + KeyString(oldKey) + " is gone", nil
	}
	if k, err := r.NewKey(old); err != nil || !r.sameKey(k, r.OldKey(item)) || !r.isOld(old) {
		return OutOrphan, "its old item " + KeyString(oldKey) + " now maps elsewhere", nil
	}
	return OutCopy, "", nil
}

package reshape

import (
	"context"
	"sync"
	"time"

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
func (r *Rewrite) verifyItem(ctx context.Context, item map[string]types.AttributeValue) (string, string, error) {
	const reads = 3
	key := r.OldKey(item)
	var out, detail string
	for attempt := 0; attempt < reads; attempt++ {
		if attempt > 0 {
			if err := ddb.Backoff(ctx, attempt+2); err != nil {
				return "", "", err
			}
			var err error
			if item, err = r.read(ctx, key); err != nil {
				return "", "", err
			}
			if item == nil {
				return OutGone, "", nil
			}
		}
		var err error
		out, detail, err = r.classifyPair(ctx, item)
		if err != nil {
			return "", "", err
		}
		switch out {
		case OutMissing, OutDifferent, OutOrphan:
			continue // maybe a live write between the two reads: read again
		}
		return out, detail, nil
	}
	return out, detail, nil
}

// classifyPair reads the other half of item's pair and says how they stand.
func (r *Rewrite) classifyPair(ctx context.Context, item map[string]types.AttributeValue) (string, string, error) {
	if r.markerClash(item) {
		return OutMarkerClash, "holds the attribute " + r.marker() + " without being a copy of this rewrite: it is never moved", nil
	}
	if r.isOld(item) {
		newKey, err := r.NewKey(item)
		if err != nil {
			return OutNotDerivable, err.Error(), nil
		}
		cp, err := r.read(ctx, newKey)
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
	old, err := r.read(ctx, oldKey)
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

package reshape

import (
	"context"
	"sort"
	"sync"

	"github.com/lakemeta/lake/sweep"
)

// RewritePlan is what PlanRewrite found: a read-only pass before apply.
type RewritePlan struct {
	Table   string `json:"table"`
	Phase   Phase  `json:"phase"`
	Scanned int64  `json:"scanned"`
	// Covered old items, of which Derivable have a new key; Copies are
	// copies already made.
	Covered      int64     `json:"covered"`
	Derivable    int64     `json:"derivable"`
	NotDerivable []ItemRef `json:"notDerivable,omitempty"`
	Copies       int64     `json:"copies"`
	// Collisions are the new keys that two old items map to, or that an
	// item the rewrite would not copy already holds: apply would never
	// overwrite them, and they would block finalize. Fix the template or
	// the data first.
	Collisions []Collision `json:"collisions,omitempty"`
	// Examples show a few old keys and their new keys.
	Examples []ItemRef `json:"examples,omitempty"`
	// DistinctKeys counts the new partition key values; Hottest are the
	// most used, and Warning says when one would concentrate the copies'
	// writes (and the table's traffic after the rewrite) on one partition.
	DistinctKeys int        `json:"distinctKeys"`
	Hottest      []KeyShare `json:"hottest"`
	Warning      string     `json:"warning,omitempty"`
}

// Collision is one new key claimed more than once.
type Collision struct {
	NewKey string   `json:"newKey"`
	Claims []string `json:"claims"` // the old keys mapping to it, and "existing item" when one holds it
}

// PlanRewrite scans the table (read-only) and counts the covered items, the
// derivable ones, the copies already made, and reports every new key that
// two items would share before anything is written. It holds every new key
// in memory (about 100 bytes per covered item).
func (r *Rewrite) PlanRewrite(ctx context.Context, o PlanOptions) (*RewritePlan, error) {
	phase, err := r.Phase(ctx)
	if err != nil {
		return nil, err
	}
	plan := &RewritePlan{Table: r.spec.Table, Phase: phase}
	examples := o.Examples
	if examples <= 0 {
		examples = DefaultExamples
	}
	if o.Top <= 0 {
		o.Top = DefaultTop
	}
	if o.HotShare <= 0 {
		o.HotShare = DefaultHotShare
	}
	var mu sync.Mutex
	pks := map[string]int64{}       // new partition key value → items
	claims := map[string][]string{} // new key → old keys
	others := map[string]string{}   // key of an item that is not old → the old key it copies ("" for none)
	sum, err := sweep.Run(ctx, r.api, sweep.Options{Table: r.spec.Table, Segments: o.Segments, PageSize: o.PageSize, Progress: o.Progress},
		func(ctx context.Context, p *sweep.Page) error {
			mu.Lock()
			defer mu.Unlock()
			for _, item := range p.Items {
				key := KeyString(r.OldKey(item))
				if !r.isOld(item) {
					from := ""
					if k, ok := r.isCopy(item); ok {
						from = KeyString(k)
						plan.Copies++
					}
					others[key] = from
					continue
				}
				plan.Covered++
				nk, err := r.NewKey(item)
				if err != nil {
					if len(plan.NotDerivable) < examples {
						plan.NotDerivable = append(plan.NotDerivable, ItemRef{Key: key, State: OutNotDerivable, Detail: err.Error()})
					}
					continue
				}
				plan.Derivable++
				pks[scalarText(nk[r.keyNames[0]])]++
				nks := KeyString(nk)
				claims[nks] = append(claims[nks], key)
				if len(plan.Examples) < examples {
					plan.Examples = append(plan.Examples, ItemRef{Key: key, State: "new key", Detail: nks})
				}
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	plan.Scanned = sum.Scanned
	plan.DistinctKeys = len(pks)
	plan.Hottest, plan.Warning = hottest(pks, plan.Derivable, o.Top, o.HotShare)
	for nk, olds := range claims {
		from, held := others[nk]
		if len(olds) > 1 || (held && (from == "" || from != olds[0])) {
			c := Collision{NewKey: nk, Claims: append([]string(nil), olds...)}
			if held && (from == "" || len(olds) > 1 || from != olds[0]) {
				c.Claims = append(c.Claims, "existing item")
			}
			sort.Strings(c.Claims)
			plan.Collisions = append(plan.Collisions, c)
		}
	}
	sort.Slice(plan.Collisions, func(i, j int) bool { return plan.Collisions[i].NewKey < plan.Collisions[j].NewKey })
	return plan, nil
}

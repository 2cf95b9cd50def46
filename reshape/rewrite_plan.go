package reshape

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/lakemeta/lake/metastore"
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
	// MarkerClashes are covered items that already hold an attribute named
	// like the rewrite's marker without being copies (some of them; Clashes
	// counts them all): the spec is refused until it names another marker.
	MarkerClashes []ItemRef `json:"markerClashes,omitempty"`
	Clashes       int64     `json:"clashes,omitempty"`
	Copies        int64     `json:"copies"`
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

// Err is nil when apply could move every covered item. Covered items that
// hold the marker refuse the spec (metastore.ErrInvalidArgument: choose
// another marker); items whose new key cannot be derived give an error
// matching metastore.ErrRefused. Both name the items. (Collisions are the
// caller's to report: they name keys, not items.)
func (p *RewritePlan) Err() error {
	if p.Clashes > 0 {
		return fmt.Errorf("%w: reshape spec: rewrite.marker: %d covered items already hold the attribute the rewrite marks its copies with (e.g. %s): name another rewrite.marker", metastore.ErrInvalidArgument, p.Clashes, p.MarkerClashes[0].Key)
	}
	if n := p.Covered - p.Derivable; n > 0 {
		var names []string
		for _, e := range p.NotDerivable {
			names = append(names, e.Key+" ("+e.Detail+")")
		}
		return fmt.Errorf("%w: reshape: %d covered items have no new key (apply would skip them and exit non-zero): %s", metastore.ErrRefused, n, strings.Join(names, "; "))
	}
	return nil
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
				if r.markerClash(item) {
					plan.Clashes++
					if len(plan.MarkerClashes) < examples {
						plan.MarkerClashes = append(plan.MarkerClashes, ItemRef{Key: key, State: OutMarkerClash, Detail: "holds the attribute " + r.marker() + " without being a copy of this rewrite"})
					}
					continue
				}
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

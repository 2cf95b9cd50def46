package reshape

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/sweep"
)

// PlanOptions configure Plan.
type PlanOptions struct {
	Segments int
	PageSize int
	// Examples is how many not-derivable items to show (DefaultExamples).
	Examples int
	// Top is how many of the hottest new partition keys to show
	// (DefaultTop).
	Top int
	// HotShare is the share of the covered items above which one new
	// partition key is reported as concentrating writes (DefaultHotShare).
	HotShare float64
	Progress func(sweep.Progress)
}

// Plan defaults.
const (
	DefaultExamples = 5
	DefaultTop      = 10
	DefaultHotShare = 0.10
	// minItemsForHotWarning: on a tiny table every key is a large share.
	minItemsForHotWarning = 100
)

// PlanReport is what a read-only pass found.
type PlanReport struct {
	Table string `json:"table"`
	Index string `json:"index"`
	// IndexStatus is the index's status, "" when it does not exist yet.
	IndexStatus string `json:"indexStatus"`
	Scanned     int64  `json:"scanned"`
	Covered     int64  `json:"covered"`
	Converted   int64  `json:"converted"`
	// Missing and Stale are the derivable items apply would write.
	Missing int64 `json:"missing"`
	Stale   int64 `json:"stale"`
	// NotDerivable items cannot be converted: a source is missing or of
	// the wrong type, a key would render empty or too long, or the item
	// would outgrow 400 KB. Examples shows some of them.
	NotDerivable int64     `json:"notDerivable"`
	Examples     []Example `json:"examples,omitempty"`
	// Foreign items already hold a derived attribute with a value of their
	// own (the index does not exist yet, so the reshape wrote none): apply
	// would not overwrite them, and the spec is refused (Err) unless it
	// takes the attribute over. ForeignExamples shows some of them.
	Foreign         int64     `json:"foreign"`
	ForeignExamples []Example `json:"foreignExamples,omitempty"`
	// EstimatedWCU is the write capacity apply would use for them, index
	// writes included.
	EstimatedWCU float64 `json:"estimatedWCU"`
	// DistinctKeys is the number of distinct new partition key values.
	DistinctKeys int        `json:"distinctKeys"`
	Hottest      []KeyShare `json:"hottest"`
	// Warning, when set, says the new partition key would concentrate
	// writes (DynamoDB can throttle the base table's writes while a GSI's
	// hot partition cannot keep up).
	Warning string `json:"warning,omitempty"`
}

// Err is nil when apply could convert every covered item. Foreign items
// refuse the spec (metastore.ErrInvalidArgument: it derives an attribute
// the items already use); items that cannot be converted give an error
// matching metastore.ErrRefused. Both name the items.
func (p PlanReport) Err() error {
	name := func(ex []Example) string {
		var parts []string
		for _, e := range ex {
			parts = append(parts, e.Key+" ("+e.Reason+")")
		}
		return strings.Join(parts, "; ")
	}
	if p.Foreign > 0 {
		return fmt.Errorf("%w: reshape spec: %d items already hold a derived attribute with values of their own: %s", metastore.ErrInvalidArgument, p.Foreign, name(p.ForeignExamples))
	}
	if p.NotDerivable > 0 {
		return fmt.Errorf("%w: reshape: %d covered items cannot be converted (apply would skip them and exit non-zero): %s", metastore.ErrRefused, p.NotDerivable, name(p.Examples))
	}
	return nil
}

// Derivable is the number of covered items whose new attributes can be
// derived but are not yet right (what apply would write).
func (p PlanReport) Derivable() int64 { return p.Missing + p.Stale }

// Example is an item that cannot be converted, and why.
type Example struct {
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

// KeyShare is one new partition key value and how many covered items it
// would hold.
type KeyShare struct {
	Value string  `json:"value"`
	Items int64   `json:"items"`
	Share float64 `json:"share"`
}

// Plan makes a read-only pass over the table: how many items the spec
// covers, how many are already converted, how many apply would write and
// how many cannot be derived (with examples), and how the new partition key
// would spread them (the hottest values and their share), with a warning
// when it would concentrate writes. It creates and writes nothing.
func (r *Reshaper) Plan(ctx context.Context, opts PlanOptions) (PlanReport, error) {
	if opts.Examples <= 0 {
		opts.Examples = DefaultExamples
	}
	if opts.Top <= 0 {
		opts.Top = DefaultTop
	}
	if opts.HotShare <= 0 {
		opts.HotShare = DefaultHotShare
	}
	rep := PlanReport{Table: r.spec.Table, Index: r.spec.Index.Name}
	if g := r.tab().index(r.spec.Index.Name); g != nil {
		rep.IndexStatus = string(g.IndexStatus)
	}
	var mu sync.Mutex
	counts := map[string]int64{}
	pk := r.spec.Index.PartitionKey.Attribute
	// Before the index exists the reshape has written nothing, so any
	// derived value that differs from the derivation is the item's own.
	checking := !r.IndexExists()
	_, err := sweep.Run(ctx, r.api, sweep.Options{
		Table: r.spec.Table, Segments: opts.Segments, PageSize: opts.PageSize, DryRun: true, Progress: opts.Progress,
	}, func(_ context.Context, p *sweep.Page) error {
		mu.Lock()
		defer mu.Unlock()
		rep.Scanned += int64(p.Scanned)
		for _, item := range p.Items {
			v := r.spec.classify(item, checking)
			if v.State != NotCovered {
				rep.Covered++
			}
			switch v.State {
			case Foreign:
				rep.Foreign++
				if len(rep.ForeignExamples) < opts.Examples {
					rep.ForeignExamples = append(rep.ForeignExamples, Example{Key: KeyString(r.tab().key(item)), Reason: v.Reason})
				}
			case NotDerivable:
				rep.NotDerivable++
				if len(rep.Examples) < opts.Examples {
					rep.Examples = append(rep.Examples, Example{Key: KeyString(r.tab().key(item)), Reason: v.Reason})
				}
			case Converted:
				rep.Converted++
			case Missing, Stale:
				if v.State == Missing {
					rep.Missing++
				} else {
					rep.Stale++
				}
				rep.EstimatedWCU += r.estimate(item, v.Want)
			}
			if v.Want != nil {
				counts[scalarText(v.Want[pk])]++
			}
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	rep.DistinctKeys = len(counts)
	rep.Hottest, rep.Warning = hottest(counts, rep.Converted+rep.Missing+rep.Stale, opts.Top, opts.HotShare)
	return rep, nil
}

// hottest returns the top values by count and a warning when the hottest
// holds more than hotShare of total.
func hottest(counts map[string]int64, total int64, top int, hotShare float64) ([]KeyShare, string) {
	out := make([]KeyShare, 0, len(counts))
	for v, n := range counts {
		out = append(out, KeyShare{Value: v, Items: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Items != out[j].Items {
			return out[i].Items > out[j].Items
		}
		return out[i].Value < out[j].Value
	})
	if len(out) > top {
		out = out[:top]
	}
	for i := range out {
		out[i].Share = float64(out[i].Items) / float64(max(total, 1))
	}
	if len(out) > 0 && total >= minItemsForHotWarning && out[0].Share > hotShare {
		return out, hotWarning(out[0], hotShare)
	}
	return out, ""
}

func hotWarning(k KeyShare, hotShare float64) string {
	return "the new partition key " + quote(k.Value) + " would hold " + percent(k.Share) +
		" of the covered items (over " + percent(hotShare) + "): its index partition takes that share of the backfill's and the live traffic's index writes, " +
		"and a GSI that cannot keep up throttles the base table's writes; add it in a quiet window, pace the sweep with --max-wcu, or choose a key that spreads"
}

func scalarText(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return v.Value
	}
	return ""
}

package reshape

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/lakemeta/lake/metastore"
)

// Reshaper applies one spec to items of its live table, one conditional
// write per item. It is what `lake reshape apply` runs on each swept item, and
// what an application calls on its write path (WithDerived) and read path
// (Convert, Get) during the transition. Safe for concurrent use.
type Reshaper struct {
	spec  *Spec
	api   API
	table atomic.Pointer[tableInfo] // replaced by refresh
	// checking: the spec's ownership of its derived attributes is not
	// established yet (see Apply), so a derived value that differs from
	// the derivation is Foreign, never repaired.
	checking atomic.Bool
	// MaxAttempts bounds how often one item is re-read and tried again when
	// its condition keeps failing because others keep writing it.
	MaxAttempts int
}

// DefaultMaxAttempts is Reshaper.MaxAttempts's default.
const DefaultMaxAttempts = 8

// New reads the table's description and returns a Reshaper for spec, which
// MUST be validated (Parse and Load do it). A spec that does not fit the
// table (it derives a key of the table, redefines an attribute's type, names
// an existing index with other keys) is refused.
func New(ctx context.Context, api API, spec *Spec) (*Reshaper, error) {
	t, err := describe(ctx, api, spec)
	if err != nil {
		return nil, err
	}
	r := &Reshaper{spec: spec, api: api, MaxAttempts: DefaultMaxAttempts}
	r.table.Store(t)
	return r, nil
}

// tab returns the table's last description.
func (r *Reshaper) tab() *tableInfo { return r.table.Load() }

// Spec returns the spec the Reshaper applies.
func (r *Reshaper) Spec() *Spec { return r.spec }

// WithDerived returns a copy of item with the derived attributes set, for the
// application's write path during the transition (dual-write): put what it
// returns, for new items and for updates of old ones alike, so that the gap
// only shrinks. An item the spec does not cover is returned unchanged. A
// covered item that cannot be derived is an error matching
// metastore.ErrInvalidArgument: written as is, it would be missing from the
// index.
func (r *Reshaper) WithDerived(item map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out := maps.Clone(item)
	if !r.spec.Covered(item) {
		return out, nil
	}
	want, err := r.spec.deriveValues(item)
	if err != nil {
		return nil, fmt.Errorf("%w: reshape: item %s: %v", metastore.ErrInvalidArgument, KeyString(r.tab().key(item)), err)
	}
	maps.Copy(out, want)
	return out, nil
}

// Outcome is what Convert did to one item.
type Outcome int

// The outcomes of Convert.
const (
	// Unchanged: nothing to write (not covered, or already converted,
	// possibly by someone else meanwhile).
	Unchanged Outcome = iota
	// Wrote: the new attributes were added to an item that had none.
	Wrote
	// Repaired: stale new attributes were rewritten from the current
	// sources.
	Repaired
	// Gone: the item was deleted meanwhile; nothing was written (an
	// UpdateItem on a deleted key would re-create it).
	Gone
	// Contended: the item kept changing for MaxAttempts tries; it is left
	// for the next pass.
	Contended
	// Failed: the item cannot be converted and nothing was written: its
	// new attributes cannot be derived, the item would outgrow DynamoDB's
	// 400 KB, it holds a derived attribute of its own (Foreign), or
	// DynamoDB refused the write for this item alone. Result.Reason says
	// which; a sweep records it and goes on.
	Failed
)

var outcomeNames = [...]string{"unchanged", "wrote", "repaired", "gone", "contended", "failed"}

// String names the outcome.
func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Result is the outcome of Convert for one item.
type Result struct {
	Outcome Outcome
	// Verdict is the classification of the item as last read.
	Verdict Verdict
	// Item is the item as stored after Convert, as far as Convert knows it
	// (nil when Gone).
	Item map[string]types.AttributeValue
	// Retries counts the failed conditions (each followed by a re-read).
	Retries int
	// WriteUnits is the write capacity DynamoDB reported for the writes,
	// index writes included (an estimate when it reported none).
	WriteUnits float64
	// Reason says why the item Failed.
	Reason string
}

// Spender is told of the write capacity units a write is about to cost (an
// estimate) and then of the correction; it may wait to hold a rate. nil
// means no accounting.
type Spender func(ctx context.Context, units float64) error

// Convert brings one item (as read from the table) to its converted state
// with one conditional UpdateItem: the derived attributes are set only if
// the item still exists, its source and coverage attributes still hold the
// values read, and each derived attribute still holds what was read (absent
// for a first conversion; the stale value for a repair). A failed condition
// means someone wrote the item meanwhile: Convert re-reads it (strongly
// consistent) and decides again, at most MaxAttempts times. It never
// re-creates a deleted item and never overwrites a concurrent write.
//
// This is the lazy backfill's read helper: call it on an item the
// application read, and use Result.Item.
func (r *Reshaper) Convert(ctx context.Context, item map[string]types.AttributeValue) (Result, error) {
	return r.convert(ctx, item, nil, false)
}

// Get reads the item at key strongly consistently and converts it if it is
// not yet converted (Convert). A missing item is metastore.ErrNotFound.
func (r *Reshaper) Get(ctx context.Context, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	item, err := r.read(ctx, key)
	if err != nil {
		return nil, err
	}
	if item == nil {
		return nil, fmt.Errorf("%w: reshape: item %s", metastore.ErrNotFound, KeyString(key))
	}
	res, err := r.Convert(ctx, item)
	if err != nil {
		return nil, err
	}
	if res.Item == nil {
		return nil, fmt.Errorf("%w: reshape: item %s (deleted meanwhile)", metastore.ErrNotFound, KeyString(key))
	}
	return res.Item, nil
}

func (r *Reshaper) convert(ctx context.Context, item map[string]types.AttributeValue, spend Spender, dry bool) (Result, error) {
	var res Result
	for attempt := 0; ; attempt++ {
		res.Verdict = r.spec.classify(item, r.checking.Load())
		res.Item = item
		switch res.Verdict.State {
		case NotCovered, Converted:
			res.Outcome = Unchanged
			return res, nil
		case NotDerivable, Foreign:
			res.Outcome, res.Reason = Failed, res.Verdict.Reason
			return res, nil
		}
		if attempt >= max(r.MaxAttempts, 1) {
			res.Outcome = Contended
			return res, nil
		}
		outcome := Wrote
		if res.Verdict.State == Stale {
			outcome = Repaired
		}
		if dry {
			res.Outcome = outcome
			return res, nil
		}
		units, err := r.update(ctx, item, res.Verdict.Want, spend)
		res.WriteUnits += units
		if err == nil {
			res.Outcome = outcome
			res.Item = maps.Clone(item)
			maps.Copy(res.Item, res.Verdict.Want)
			return res, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			if reason, ok := itemRefused(err); ok {
				res.Outcome, res.Reason = Failed, reason
				return res, nil
			}
			return res, err
		}
		res.Retries++
		item, err = r.read(ctx, r.tab().key(item))
		if err != nil {
			return res, err
		}
		if item == nil {
			res.Outcome, res.Item = Gone, nil
			return res, nil
		}
	}
}

// itemRefused says err is DynamoDB refusing the write for this item's data
// alone (a ValidationException: the item would outgrow 400 KB, an index key
// value it cannot hold), which no retry changes and which must not stop a
// sweep of every other item; it returns DynamoDB's message.
func itemRefused(err error) (string, bool) {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" {
		return "DynamoDB refused the write: " + ae.ErrorMessage(), true
	}
	return "", false
}

// update writes want onto the item read as item, conditioned on everything
// the decision was made from. It returns the write capacity used.
func (r *Reshaper) update(ctx context.Context, item, want map[string]types.AttributeValue, spend Spender) (float64, error) {
	in, err := r.updateInput(item, want)
	if err != nil {
		return 0, err
	}
	est := r.estimate(item, want)
	if spend != nil {
		if err := spend(ctx, est); err != nil {
			return 0, err
		}
	}
	out, err := r.api.UpdateItem(ctx, in)
	used := est
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil && out.ConsumedCapacity != nil && out.ConsumedCapacity.CapacityUnits != nil:
		used = *out.ConsumedCapacity.CapacityUnits
	case errors.As(err, &ccf):
		used = 1 // a failed condition still costs one write unit
	case err != nil:
		used = 0
	}
	if spend != nil && used != est {
		if serr := spend(ctx, used-est); serr != nil && err == nil {
			return used, serr
		}
	}
	if err != nil && !errors.As(err, &ccf) {
		return used, fmt.Errorf("lake: reshape: update item %s: %w", KeyString(r.tab().key(item)), err)
	}
	return used, err
}

// updateInput builds the conditional UpdateItem with the expression builder.
// Every attribute name is taken literally (attrNames): a name holding a dot
// or brackets is one attribute, never a path.
func (r *Reshaper) updateInput(item, want map[string]types.AttributeValue) (*dynamodb.UpdateItemInput, error) {
	s := r.spec
	var n attrNames
	cond := expression.AttributeExists(n.name(r.tab().keyNames[0]))
	and := func(c expression.ConditionBuilder) { cond = expression.And(cond, c) }
	for _, src := range s.sources {
		and(n.name(src).Equal(expression.Value(item[src])))
	}
	for a, prefix := range s.Covers.KeyPrefixes {
		if !r.isKey(a) { // key attributes cannot change: the key already pins them
			and(n.name(a).BeginsWith(prefix))
		}
	}
	for _, a := range s.Covers.Present {
		if !slices.Contains(s.sources, a) { // a source is already pinned by equality
			and(expression.AttributeExists(n.name(a)))
		}
	}
	for _, a := range s.Covers.Absent {
		and(expression.AttributeNotExists(n.name(a)))
	}
	var upd expression.UpdateBuilder
	for i, d := range s.derived {
		if old, ok := item[d]; ok {
			and(n.name(d).Equal(expression.Value(old)))
		} else {
			and(expression.AttributeNotExists(n.name(d)))
		}
		if i == 0 {
			upd = expression.Set(n.name(d), expression.Value(want[d]))
		} else {
			upd = upd.Set(n.name(d), expression.Value(want[d]))
		}
	}
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return nil, fmt.Errorf("lake: reshape: build update of %s: %w", KeyString(r.tab().key(item)), err)
	}
	return &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.Table),
		Key:                       r.tab().key(item),
		ConditionExpression:       expr.Condition(),
		UpdateExpression:          expr.Update(),
		ExpressionAttributeNames:  n.resolve(expr.Names()),
		ExpressionAttributeValues: expr.Values(),
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityIndexes,
	}, nil
}

func (r *Reshaper) isKey(a string) bool {
	for _, k := range r.tab().keyNames {
		if k == a {
			return true
		}
	}
	return false
}

// estimate is the write capacity an update is expected to cost before
// DynamoDB says: one unit per KB of the item for the table, as much for the
// new index (one write to add the item; two when a stale index key moves
// it: a delete and a put), and as much again for every other index of the
// table that holds the item and projects an attribute the update sets
// (projection ALL, or INCLUDE naming a derived attribute): DynamoDB bills
// their index writes too.
func (r *Reshaper) estimate(item, want map[string]types.AttributeValue) float64 {
	after := maps.Clone(item)
	maps.Copy(after, want)
	units := math.Ceil(float64(itemSize(after)) / 1024)
	indexWrites := 1.0
	if pk := r.spec.Index.PartitionKey.Attribute; item[pk] != nil && !sameScalar(item[pk], want[pk]) {
		indexWrites = 2
	}
	desc := r.tab().desc
	for _, g := range desc.GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) != r.spec.Index.Name && r.projects(g.KeySchema, g.Projection, item) {
			indexWrites++
		}
	}
	for _, l := range desc.LocalSecondaryIndexes {
		if r.projects(l.KeySchema, l.Projection, item) {
			indexWrites++
		}
	}
	return units * (1 + indexWrites)
}

// projects says an existing index with key schema ks and projection p holds
// item and projects one of the derived attributes, so that setting them
// rewrites the item's entry in that index.
func (r *Reshaper) projects(ks []types.KeySchemaElement, p *types.Projection, item map[string]types.AttributeValue) bool {
	for _, k := range ks {
		if _, ok := item[aws.ToString(k.AttributeName)]; !ok {
			return false // a sparse index: the item is not in it
		}
	}
	if p == nil {
		return false
	}
	switch p.ProjectionType {
	case types.ProjectionTypeAll:
		return true
	case types.ProjectionTypeInclude:
		for _, a := range p.NonKeyAttributes {
			if _, ok := r.spec.Derive[a]; ok {
				return true
			}
		}
	}
	return false
}

// read returns the item at key, strongly consistent; nil when it does not
// exist.
func (r *Reshaper) read(ctx context.Context, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out, err := r.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.spec.Table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("lake: reshape: read item %s: %w", KeyString(key), err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

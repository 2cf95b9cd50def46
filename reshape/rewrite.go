package reshape

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
)

// RewriteAPI is the part of the DynamoDB client a key rewrite uses: API and
// the transactions that keep an old item and its copy together.
type RewriteAPI interface {
	API
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error)
}

var _ RewriteAPI = (*dynamodb.Client)(nil)

// Rewrite runs a rewrite-key spec on its live table: Apply copies each
// covered item to its new key, Verify proves every copy equal, Finalize
// deletes the old items, Rollback the copies; Put, Delete and Get are the
// application's dual-write and dual-read helpers meanwhile. Where the rewrite
// stands (its Phase) lives in the state store, so that every process running
// the helpers learns it. Safe for concurrent use.
//
// Every write touches an old item and its copy in one TransactWriteItems
// conditioned on both as read (absent, or holding every attribute read), so
// that the two never diverge through it and nothing deleted comes back.
type Rewrite struct {
	spec     *Spec
	api      RewriteAPI
	state    *metastore.Store
	keyNames []string // the table's HASH, then RANGE
	// MaxAttempts bounds how often one item is re-read and tried again
	// while others keep writing it (DefaultMaxAttempts).
	MaxAttempts int
	// RefreshInterval is how long the helpers trust the phase they read
	// from the state store (DefaultRefreshInterval). Finalize and Rollback
	// wait twice as long after announcing themselves (Settle), so that
	// every helper sees them before they sweep.
	RefreshInterval time.Duration

	problems problemLog // the last Apply's items it could not handle

	mu      sync.Mutex
	phase   Phase
	phaseAt time.Time
}

// DefaultRefreshInterval is Rewrite.RefreshInterval's default.
const DefaultRefreshInterval = time.Second

// NewRewrite reads the table's description and returns a Rewrite for spec
// (kind rewrite-key, validated). state is where the phase, the sweeps'
// cursors and the verify record live; it MUST be the same store for every
// process of the rewrite (a dynamodb:// store when they run apart). A spec
// whose rewrite.key does not name exactly the table's key attributes, or a
// key attribute that is not a string, is refused.
func NewRewrite(ctx context.Context, api RewriteAPI, spec *Spec, state *metastore.Store) (*Rewrite, error) {
	if spec.Kind != KindRewriteKey || spec.Rewrite == nil {
		return nil, fmt.Errorf("%w: reshape: spec kind %q is not %q", metastore.ErrInvalidArgument, spec.Kind, KindRewriteKey)
	}
	if state == nil {
		return nil, fmt.Errorf("%w: reshape: a key rewrite needs a state store (its phase lives there)", metastore.ErrInvalidArgument)
	}
	out, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(spec.Table)})
	if err != nil {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("%w: reshape: table %q does not exist", metastore.ErrNotFound, spec.Table)
		}
		return nil, fmt.Errorf("lake: reshape: describe table %q: %w", spec.Table, err)
	}
	r := &Rewrite{spec: spec, api: api, state: state, MaxAttempts: DefaultMaxAttempts, RefreshInterval: DefaultRefreshInterval}
	types_ := map[string]types.ScalarAttributeType{}
	for _, d := range out.Table.AttributeDefinitions {
		types_[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	for _, k := range out.Table.KeySchema {
		if k.KeyType == types.KeyTypeHash {
			r.keyNames = append([]string{aws.ToString(k.AttributeName)}, r.keyNames...)
		} else {
			r.keyNames = append(r.keyNames, aws.ToString(k.AttributeName))
		}
	}
	var errs []string
	for _, k := range r.keyNames {
		if _, ok := spec.Rewrite.Key[k]; !ok {
			errs = append(errs, fmt.Sprintf("rewrite.key: no template for %s, a key attribute of table %s", k, spec.Table))
		}
		if types_[k] != types.ScalarAttributeTypeS {
			errs = append(errs, fmt.Sprintf("rewrite.key.%s: the key attribute is of type %s; a template derives strings (S)", k, types_[k]))
		}
	}
	for k := range spec.Rewrite.Key {
		if !slices.Contains(r.keyNames, k) {
			errs = append(errs, fmt.Sprintf("rewrite.key.%s: not a key attribute of table %s (its keys: %v)", k, spec.Table, r.keyNames))
		}
	}
	if len(errs) > 0 {
		return nil, joinSpecErrors(errs)
	}
	return r, nil
}

// Spec returns the spec the Rewrite runs.
func (r *Rewrite) Spec() *Spec { return r.spec }

// StatePrefix is where the rewrite keeps its phase, verify record and
// sweep cursors: reshape/TABLE/rewrite/ and a digest of the spec, so that
// another spec on the same table has a state of its own.
func (r *Rewrite) StatePrefix() string {
	b, _ := json.Marshal(r.spec)
	h := sha256.Sum256(b)
	return fmt.Sprintf("reshape/%s/rewrite/%s/", r.spec.Table, hex.EncodeToString(h[:6]))
}

func (r *Rewrite) marker() string { return r.spec.Rewrite.Marker }

// KeyNames returns the table's key attributes: the partition key, then the
// sort key if any.
func (r *Rewrite) KeyNames() []string { return slices.Clone(r.keyNames) }

// OldKey returns item's primary key (its current key: old for an old item).
func (r *Rewrite) OldKey(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	k := make(map[string]types.AttributeValue, len(r.keyNames))
	for _, n := range r.keyNames {
		if v, ok := item[n]; ok {
			k[n] = v
		}
	}
	return k
}

// NewKey derives the new key of an item (or of a reference holding the
// attributes the templates read). An attribute missing or not a string or
// number, an empty value or one over DynamoDB's key size limits makes the
// item not derivable: the error says which and why.
func (r *Rewrite) NewKey(item map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	k := make(map[string]types.AttributeValue, len(r.keyNames))
	for i, n := range r.keyNames {
		v, err := r.spec.templates[n].render(item)
		if err != nil {
			return nil, fmt.Errorf("new %s: %v", n, err)
		}
		limit := maxSortKeyBytes
		if i == 0 {
			limit = maxPartitionKeyBytes
		}
		switch {
		case v == "":
			return nil, fmt.Errorf("new %s: renders an empty string, which a key cannot hold", n)
		case len(v) > limit:
			return nil, fmt.Errorf("new %s: %d bytes, over the %d a key may hold", n, len(v), limit)
		}
		k[n] = &types.AttributeValueMemberS{Value: v}
	}
	return k, nil
}

// isCopy says item is a copy made by the rewrite and returns the key of its
// old item: its marker is a map holding exactly the table's key attributes,
// and its own key is the new key its attributes derive (a copy holds its
// old item's attributes under the key they derive). An item of the user's
// that merely holds an attribute named like the marker is no copy: it is
// never deleted as an orphan.
func (r *Rewrite) isCopy(item map[string]types.AttributeValue) (map[string]types.AttributeValue, bool) {
	m, ok := item[r.marker()].(*types.AttributeValueMemberM)
	if !ok || len(m.Value) != len(r.keyNames) {
		return nil, false
	}
	for _, n := range r.keyNames {
		if _, ok := m.Value[n]; !ok {
			return nil, false
		}
	}
	if nk, err := r.NewKey(item); err != nil || !r.sameKey(nk, r.OldKey(item)) {
		return nil, false
	}
	return m.Value, true
}

// markerClash says item is covered and holds the marker attribute without
// being a copy: the rewrite can neither move it (the marker would be
// overwritten) nor tell it from a copy, so it is reported, never touched.
func (r *Rewrite) markerClash(item map[string]types.AttributeValue) bool {
	if _, ok := item[r.marker()]; !ok || !r.spec.Covered(item) {
		return false
	}
	_, isCopy := r.isCopy(item)
	return !isCopy
}

// isOld says item is an old item the rewrite moves: covered, and not a copy.
func (r *Rewrite) isOld(item map[string]types.AttributeValue) bool {
	if _, ok := item[r.marker()]; ok {
		return false
	}
	return r.spec.Covered(item)
}

// copyOf returns the copy of old under newKey, marked with old's key.
func (r *Rewrite) copyOf(old, newKey map[string]types.AttributeValue, marked bool) map[string]types.AttributeValue {
	c := maps.Clone(old)
	maps.Copy(c, newKey)
	delete(c, r.marker())
	if marked {
		c[r.marker()] = &types.AttributeValueMemberM{Value: r.OldKey(old)}
	}
	return c
}

// sameContent says copy holds old's attributes, apart from the key and the
// marker.
func (r *Rewrite) sameContent(old, copy map[string]types.AttributeValue) bool {
	skip := func(n string) bool { return n == r.marker() || slices.Contains(r.keyNames, n) }
	count := 0
	for n, v := range old {
		if skip(n) {
			continue
		}
		count++
		if !avEqual(v, copy[n]) {
			return false
		}
	}
	for n := range copy {
		if !skip(n) {
			count--
		}
	}
	return count == 0
}

// sameKey compares two keys of the table.
func (r *Rewrite) sameKey(a, b map[string]types.AttributeValue) bool {
	for _, n := range r.keyNames {
		if !avEqual(a[n], b[n]) {
			return false
		}
	}
	return true
}

// read returns the item at key, strongly consistent; nil when absent.
func (r *Rewrite) read(ctx context.Context, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out, err := r.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.spec.Table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("lake: reshape: read item %s: %w", KeyString(key), err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// readPair reads an old item and the item at its new key.
func (r *Rewrite) readPair(ctx context.Context, oldKey, newKey map[string]types.AttributeValue) (old, cp map[string]types.AttributeValue, err error) {
	if old, err = r.read(ctx, oldKey); err != nil {
		return nil, nil, err
	}
	if cp, err = r.read(ctx, newKey); err != nil {
		return nil, nil, err
	}
	return old, cp, nil
}

func (r *Rewrite) attempts() int { return max(r.MaxAttempts, 1) }

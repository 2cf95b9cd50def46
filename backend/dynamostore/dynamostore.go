// Package dynamostore is lake's Amazon DynamoDB backend, in two layouts.
//
// # Layout v1 (legacy)
//
// One table TABLE with HASH key "pk" (S), the logical key, and the value in
// the binary attribute "v". A point read is a strongly consistent GetItem. A
// prefix read is a Scan with a begins_with(pk, prefix) filter, paged through
// LastEvaluatedKey. DynamoDB applies Limit to the items it evaluates before
// the filter, so a prefix read pays for every item of the table: the cost of
// a catalog refresh grows with the retained append operations, manifests,
// leases and tombstones. v1 is kept faithful, as the baseline and the
// migration source. Page order is DynamoDB's scan (hash) order.
//
// # Layout v2 (prefix-isolated)
//
// A companion table TABLE_prefix_v2 with HASH key "bucket" (S), the family
// and shard of the key as package keyspace computes them, and RANGE key "pk"
// (S), the logical key. A point read computes one bucket and is a strongly
// consistent GetItem. A prefix read queries the family's shards one after
// another with bucket = :b AND begins_with(pk, :prefix), ConsistentRead, and a
// Limit of what remains of the page, so a request never evaluates an item of
// another family or outside the prefix. The cursor holds the family, the shard
// and the last key. Page order is shard by shard, key order within a shard.
//
// A prefix without "/" does not pin a family. It is served from the family
// registry, a control record to which every family is added (an atomic ADD to
// a string set) before its first write: the root family's shards and those of
// every registered family whose name starts with the prefix. It never scans.
//
// The shard counts and the hash format are frozen in a control record when
// the v2 table is created; Open compares them with the process's and refuses
// to open on a difference.
//
// # Writes
//
// Every write, conditional or not, is one TransactWriteItems with a
// ClientRequestToken that is fixed for the logical operation and reused by
// each retry. DynamoDB applies a token at most once (for ten minutes), so a
// retry after a lost response returns the first attempt's success instead of
// failing its own condition: a write is applied exactly once and a store
// never reports its own retried write as a conflict. Every item carries the
// token of the write that wrote it (attribute "w"); should a retry still see
// a failed condition, the old item DynamoDB returns with the cancellation
// tells "my earlier attempt applied" from "someone else won". Transactions
// cost two write units per item where a plain PutItem costs one: that is the
// price of exactly-once.
//
// # Cost
//
// Every data request asks for its consumed capacity; Driver.Stats returns
// requests by operation, items evaluated (ScannedCount), items returned and
// capacity units, so that cost claims are ratios anyone can reproduce.
package dynamostore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/keyspace"
	"github.com/lakemeta/lake/metastore"
)

// Layout names a physical layout.
type Layout string

// The layouts.
const (
	LayoutV1 Layout = "v1"
	LayoutV2 Layout = "v2"
)

// V2Suffix is appended to the table name to name the v2 companion table.
// NB: must not change.
const V2Suffix = "_prefix_v2"

// Attribute names. NB: part of the table format; must not change.
const (
	attrPK       = "pk"
	attrBucket   = "bucket"
	attrValue    = "v"
	attrWrite    = "w"
	attrFamilies = "fams"
)

// controlBucket is the v2 partition of lake's control records. It cannot
// collide with a user bucket: those end in "#" and three digits.
const controlBucket = metastore.ControlPrefix + "#control"

// Control record keys.
const (
	layoutKey   = metastore.ControlPrefix + "layout"
	familiesKey = metastore.ControlPrefix + "families"
)

// maxItemBytes is DynamoDB's item size limit.
const maxItemBytes = 400 * 1024

// Options configure Open.
type Options struct {
	// Table is the v1 table name; the v2 table is Table + V2Suffix.
	Table string
	// Layout selects the layout; empty means LayoutV1.
	Layout Layout
	// Retryer decides which failures are retried and how long to wait; nil
	// means NewRetryer(RetryOptions{}). The API client itself should not retry (its
	// retries would hide the attempts from the idempotency bookkeeping).
	Retryer aws.Retryer
	// Params are the v2 layout parameters this process computes buckets
	// with; nil means keyspace.DefaultParams(). They must equal the table's.
	Params *keyspace.Params
}

// Driver is the DynamoDB implementation of metastore.Driver.
type Driver struct {
	api     API
	retryer aws.Retryer
	layout  Layout
	v1      string // v1 table name
	v2      string // v2 table name
	params  keyspace.Params
	meter   meter

	registered sync.Map // family -> struct{}: families known to be in the registry
}

var _ metastore.Driver = (*Driver)(nil)

func (o *Options) fill() error {
	if o.Table == "" {
		return fmt.Errorf("%w: empty DynamoDB table name", metastore.ErrInvalidArgument)
	}
	if err := validTableName(o.Table + V2Suffix); err != nil {
		return err
	}
	switch o.Layout {
	case "":
		o.Layout = LayoutV1
	case LayoutV1, LayoutV2:
	default:
		return fmt.Errorf("%w: unknown layout %q (want v1 or v2)", metastore.ErrInvalidArgument, o.Layout)
	}
	if o.Retryer == nil {
		o.Retryer = NewRetryer(RetryOptions{})
	}
	if o.Params == nil {
		p := keyspace.DefaultParams()
		o.Params = &p
	}
	return o.Params.Validate()
}

func validTableName(name string) error {
	if len(name) < 3 || len(name) > 255 {
		return fmt.Errorf("%w: DynamoDB table name %q must be 3 to 255 characters", metastore.ErrInvalidArgument, name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Errorf("%w: DynamoDB table name %q may contain only a-z, A-Z, 0-9, '_', '-' and '.'", metastore.ErrInvalidArgument, name)
		}
	}
	return nil
}

// Open opens the store over existing tables; Create makes them. A missing
// table is an error matching ErrNoTable; v2 layout parameters that differ
// from opts.Params give ErrLayoutMismatch.
func Open(ctx context.Context, api API, opts Options) (*Driver, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	d := &Driver{api: api, retryer: opts.Retryer, layout: opts.Layout, v1: opts.Table, v2: opts.Table + V2Suffix, params: *opts.Params}
	switch d.layout {
	case LayoutV1:
		if err := d.describe(ctx, d.v1); err != nil {
			return nil, err
		}
	case LayoutV2:
		if err := d.checkParams(ctx); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Name returns "dynamodb-v1" or "dynamodb-v2".
func (d *Driver) Name() string { return "dynamodb-" + string(d.layout) }

// Layout returns the layout the driver serves.
func (d *Driver) Layout() Layout { return d.layout }

// Table returns the name of the table the layout reads and writes.
func (d *Driver) Table() string {
	if d.layout == LayoutV2 {
		return d.v2
	}
	return d.v1
}

// Stats returns the cost so far; see Stats.
func (d *Driver) Stats() Stats { return d.meter.snapshot() }

// Close releases nothing: the API client is the caller's.
func (d *Driver) Close() error { return nil }

// itemKey returns the primary key of a logical key in the layout's table.
func (d *Driver) itemKey(key string) map[string]types.AttributeValue {
	if d.layout == LayoutV2 {
		return map[string]types.AttributeValue{
			attrBucket: &types.AttributeValueMemberS{Value: d.params.BucketOf(key)},
			attrPK:     &types.AttributeValueMemberS{Value: key},
		}
	}
	return map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: key}}
}

func (d *Driver) item(key string, value []byte, token string) map[string]types.AttributeValue {
	it := d.itemKey(key)
	it[attrValue] = &types.AttributeValueMemberB{Value: value}
	it[attrWrite] = &types.AttributeValueMemberS{Value: token}
	return it
}

// Get returns the value of key with a strongly consistent GetItem.
func (d *Driver) Get(ctx context.Context, key string) ([]byte, error) {
	var out *dynamodb.GetItemOutput
	err := d.retry(ctx, func(int) error {
		var err error
		out, err = d.api.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:              aws.String(d.Table()),
			Key:                    d.itemKey(key),
			ConsistentRead:         aws.Bool(true),
			ProjectionExpression:   aws.String(attrValue),
			ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		})
		return err
	})
	if err != nil {
		return nil, d.classify(err, d.Table(), key)
	}
	var found int32
	if out.Item != nil {
		found = 1
	}
	d.meter.request("GetItem", found, found, ccOf(out.ConsumedCapacity)...)
	if out.Item == nil {
		return nil, metastore.NotFound(key)
	}
	v, ok := out.Item[attrValue].(*types.AttributeValueMemberB)
	if !ok {
		return nil, fmt.Errorf("lake: item %q in %s has no binary value attribute %q", key, d.Table(), attrValue)
	}
	return v.Value, nil
}

// Put writes value under key.
func (d *Driver) Put(ctx context.Context, key string, value []byte) error {
	return d.write(ctx, []writeOp{{key: key, put: value}})
}

// CAS writes value under key if its current state satisfies expect.
func (d *Driver) CAS(ctx context.Context, key string, expect metastore.Expect, value []byte) error {
	return d.write(ctx, []writeOp{{key: key, expect: &expect, put: value}})
}

// Delete removes key if it holds exactly expected.
func (d *Driver) Delete(ctx context.Context, key string, expected []byte) error {
	e := metastore.ExpectValue(expected)
	return d.write(ctx, []writeOp{{key: key, expect: &e, del: true}})
}

// GuardedMutate applies target if the guard and target.Expect hold, in one
// transaction: a ConditionCheck on the guard and the target's write.
func (d *Driver) GuardedMutate(ctx context.Context, guard metastore.Guard, target metastore.Mutation) error {
	g := metastore.ExpectValue(guard.Value)
	e := target.Expect
	t := writeOp{key: target.Key, expect: &e}
	if target.Delete {
		t.del = true
	} else {
		t.put = target.Value
	}
	return d.write(ctx, []writeOp{{key: guard.Key, expect: &g, check: true}, t})
}

// writeOp is one item of a write transaction.
type writeOp struct {
	key    string
	expect *metastore.Expect // nil: unconditional
	put    []byte            // the new value, unless del or check
	del    bool
	check  bool // a ConditionCheck only
}

// condition builds the DynamoDB condition for expect.
func condition(expect metastore.Expect) expression.ConditionBuilder {
	if expect.Absent() {
		return expression.AttributeNotExists(expression.Name(attrPK))
	}
	return expression.Name(attrValue).Equal(expression.Value(&types.AttributeValueMemberB{Value: expect.Value()}))
}

// write applies ops in one TransactWriteItems under one idempotency token,
// retrying as the retryer allows. See the package doc for why every write is
// a transaction.
func (d *Driver) write(ctx context.Context, ops []writeOp) error {
	token := newToken()
	items := make([]types.TransactWriteItem, 0, len(ops))
	keys := make([]string, 0, len(ops))
	for _, op := range ops {
		if !op.check && !op.del {
			if err := d.registerFamily(ctx, metastore.Family(op.key)); err != nil {
				return err
			}
		}
		it, err := d.transactItem(op, token)
		if err != nil {
			return err
		}
		items = append(items, it)
		keys = append(keys, op.key)
	}
	in := &dynamodb.TransactWriteItemsInput{
		TransactItems:          items,
		ClientRequestToken:     aws.String(token),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}
	ambiguous := false
	err := d.retry(ctx, func(n int) error {
		out, err := d.api.TransactWriteItems(ctx, in)
		if err == nil {
			d.meter.request("TransactWriteItems", 0, 0, out.ConsumedCapacity...)
			return nil
		}
		d.meter.request("TransactWriteItems", 0, 0)
		if !surelyNotApplied(err) {
			ambiguous = true
		}
		return err
	})
	if err != nil && ambiguous {
		if applied, known := ownWriteApplied(err, ops, token); known {
			if applied {
				return nil
			}
		} else {
			return fmt.Errorf("%w: the outcome of a write to %q is unknown after a lost response: %v", metastore.ErrUnavailable, ops[len(ops)-1].key, err)
		}
	}
	return d.classify(err, d.Table(), keys...)
}

// ownWriteApplied looks at a failed retry of a write whose earlier attempt
// may have applied. It returns (true, true) if the old items DynamoDB returned
// with the cancellation show this write's token on every written item (the
// earlier attempt applied, and nobody wrote since), (false, true) if they show
// another writer's value, and (false, false) if it cannot tell (a delete
// leaves no item to carry the token).
func ownWriteApplied(err error, ops []writeOp, token string) (applied, known bool) {
	tce, ok := asCanceled(err)
	if !ok || len(tce.CancellationReasons) != len(ops) {
		return false, true
	}
	for i, r := range tce.CancellationReasons {
		if aws.ToString(r.Code) != "ConditionalCheckFailed" || ops[i].check {
			continue
		}
		if ops[i].del {
			if r.Item == nil {
				return false, false
			}
			return false, true
		}
		w, _ := r.Item[attrWrite].(*types.AttributeValueMemberS)
		v, _ := r.Item[attrValue].(*types.AttributeValueMemberB)
		if w == nil || w.Value != token || v == nil || !bytes.Equal(v.Value, ops[i].put) {
			return false, true
		}
		return true, true
	}
	return false, true
}

func (d *Driver) transactItem(op writeOp, token string) (types.TransactWriteItem, error) {
	table := aws.String(d.Table())
	var expr *expression.Expression
	if op.expect != nil {
		e, err := expression.NewBuilder().WithCondition(condition(*op.expect)).Build()
		if err != nil {
			return types.TransactWriteItem{}, fmt.Errorf("lake: build condition: %w", err)
		}
		expr = &e
	}
	var names map[string]string
	var values map[string]types.AttributeValue
	var cond *string
	if expr != nil {
		names, values, cond = expr.Names(), expr.Values(), expr.Condition()
	}
	old := types.ReturnValuesOnConditionCheckFailureAllOld
	switch {
	case op.check:
		return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: table, Key: d.itemKey(op.key), ConditionExpression: cond,
			ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		}}, nil
	case op.del:
		return types.TransactWriteItem{Delete: &types.Delete{
			TableName: table, Key: d.itemKey(op.key), ConditionExpression: cond,
			ExpressionAttributeNames: names, ExpressionAttributeValues: values,
			ReturnValuesOnConditionCheckFailure: old,
		}}, nil
	default:
		item := d.item(op.key, op.put, token)
		if size := itemSize(item); size > maxItemBytes {
			return types.TransactWriteItem{}, fmt.Errorf("%w: item %q would be %d bytes, DynamoDB's limit is %d", metastore.ErrInvalidValue, op.key, size, maxItemBytes)
		}
		return types.TransactWriteItem{Put: &types.Put{
			TableName: table, Item: item, ConditionExpression: cond,
			ExpressionAttributeNames: names, ExpressionAttributeValues: values,
			ReturnValuesOnConditionCheckFailure: old,
		}}, nil
	}
}

// itemSize is DynamoDB's item size: attribute names plus values.
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberB:
			n += len(v.Value)
		}
	}
	return n
}

// newToken returns a fresh ClientRequestToken (at most 36 characters).
func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

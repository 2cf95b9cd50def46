package dynamostore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/keyspace"
	"github.com/lakemeta/lake/metastore"
)

// Layout names a physical layout, or LayoutAuto.
type Layout string

// The layouts.
const (
	// LayoutAuto follows the durable migration state: v1 until the marker
	// is published, dual writes in between, v2 after. The default.
	LayoutAuto Layout = "auto"
	// LayoutV1 forces the legacy table. Writes are refused once a
	// migration has left state v1.
	LayoutV1 Layout = "v1"
	// LayoutV2 forces the v2 table. Writes are refused while a migration
	// is between dual and v1's retirement.
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
	attrWrite    = ddb.TokenAttr // "w": the token of the write that wrote the item: lake's stamp
	attrTime     = "t"           // when lake wrote the item, unix milliseconds
	attrFamilies = "fams"
	attrExpires  = "expires" // TTL of change-log entries, unix seconds
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

// DefaultRefresh is how often a store re-reads the migration state: a
// store notices a state change at most this long after it was published.
const DefaultRefresh = time.Second

// Options configure Open.
type Options struct {
	// Table is the v1 table name; the v2 table is Table + V2Suffix.
	Table string
	// Layout selects the layout; empty means LayoutAuto.
	Layout Layout
	// Retryer decides which failures are retried and how long to wait; nil
	// means ddb.NewRetryer(ddb.RetryOptions{}). The API client itself should not
	// retry (its retries would hide the attempts from the idempotency
	// bookkeeping); NewClient makes such a client.
	Retryer aws.Retryer
	// Params are the v2 layout parameters this process computes buckets
	// with; nil means keyspace.DefaultParams(). They must equal the table's.
	Params *keyspace.Params
	// Refresh is how often the migration state is re-read; zero means
	// DefaultRefresh.
	Refresh time.Duration
	// Streams reads the v1 table's stream for the migrator (streams.go);
	// nil derives one from api when it is (or unwraps to) the SDK's
	// client.
	Streams StreamsAPI
}

// Driver is the DynamoDB implementation of metastore.Driver.
type Driver struct {
	api     ddb.API
	streams StreamsAPI
	retryer aws.Retryer
	layout  Layout
	v1      string // v1 table name
	v2      string // v2 table name
	params  keyspace.Params
	refresh time.Duration
	meter   meter

	mu   sync.Mutex
	snap stateSnapshot

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
		o.Layout = LayoutAuto
	case LayoutAuto, LayoutV1, LayoutV2:
	default:
		return fmt.Errorf("%w: unknown layout %q (want auto, v1 or v2)", metastore.ErrInvalidArgument, o.Layout)
	}
	if o.Retryer == nil {
		o.Retryer = ddb.NewRetryer(ddb.RetryOptions{})
	}
	if o.Params == nil {
		p := keyspace.DefaultParams()
		o.Params = &p
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
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

func newDriver(api ddb.API, opts Options) *Driver {
	if opts.Streams == nil {
		opts.Streams = streamsFor(api)
	}
	return &Driver{api: api, streams: opts.Streams, retryer: opts.Retryer, layout: opts.Layout, v1: opts.Table, v2: opts.Table + V2Suffix,
		params: *opts.Params, refresh: opts.Refresh}
}

// Open opens the store over existing tables; Create makes them. A missing
// table is an error matching ErrNoTable; v2 layout parameters that differ
// from opts.Params give ErrLayoutMismatch.
func Open(ctx context.Context, api ddb.API, opts Options) (*Driver, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	d := newDriver(api, opts)
	snap, err := d.state(ctx, true)
	if err != nil {
		return nil, err
	}
	// After the marker v2 is the authority: a v1 table deleted since (by
	// hand, or by retire-v1) is not needed; writes stop mirroring to it.
	needV1 := d.layout == LayoutV1 || d.layout == LayoutAuto && !snap.m.ReadsV2()
	needV2 := d.layout == LayoutV2 || d.layout == LayoutAuto && snap.m.State != StateV1
	if needV1 && !snap.hasV1 {
		return nil, fmt.Errorf("%w: %q (run `lake init` with this store URL to create it)", ErrNoTable, d.v1)
	}
	if needV2 {
		if err := d.checkParams(ctx); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Name returns "dynamodb-auto", "dynamodb-v1" or "dynamodb-v2".
func (d *Driver) Name() string { return "dynamodb-" + string(d.layout) }

// Layout returns the layout the driver was opened with.
func (d *Driver) Layout() Layout { return d.layout }

// Table returns the v1 table name (the v2 table is Table() + V2Suffix).
func (d *Driver) Table() string { return d.v1 }

// Refresh returns the interval at which the store re-reads the migration
// state.
func (d *Driver) Refresh() time.Duration { return d.refresh }

// Stats returns the cost so far; see Stats.
func (d *Driver) Stats() Stats { return d.meter.snapshot() }

// Close releases nothing: the API client is the caller's.
func (d *Driver) Close() error { return nil }

// Get returns the value of key with a strongly consistent GetItem on the
// read authority.
func (d *Driver) Get(ctx context.Context, key string) ([]byte, error) {
	snap, err := d.state(ctx, false)
	if err != nil {
		return nil, err
	}
	t := tV1
	if d.readLayout(snap.m) == LayoutV2 {
		t = tV2
	}
	v, found, err := d.getRaw(ctx, t, key)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, metastore.NotFound(key)
	}
	return v, nil
}

// getRaw is a strongly consistent GetItem of a user key in table t. It asks
// for the whole item (a few bytes more than "v") rather than sending a
// ProjectionExpression, which the server parses on every request: measured
// against a raw GetItem (BenchmarkGetInterleaved), the projection was most of
// lake's share of a point read.
func (d *Driver) getRaw(ctx context.Context, t tbl, key string) ([]byte, bool, error) {
	var out *dynamodb.GetItemOutput
	err := d.retry(ctx, func(int) error {
		var err error
		out, err = d.api.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:              aws.String(d.tableName(t)),
			Key:                    d.keyIn(t, key),
			ConsistentRead:         aws.Bool(true),
			ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		})
		return err
	})
	if err != nil {
		return nil, false, d.classify(err, d.tableName(t), key)
	}
	var found int32
	if out.Item != nil {
		found = 1
	}
	d.meter.request("GetItem", found, found, ccOf(out.ConsumedCapacity)...)
	if out.Item == nil {
		return nil, false, nil
	}
	v, ok := out.Item[attrValue].(*types.AttributeValueMemberB)
	if !ok {
		return nil, false, fmt.Errorf("lake: item %q in %s has no binary value attribute %q", key, d.tableName(t), attrValue)
	}
	return v.Value, true, nil
}

// Put writes value under key.
func (d *Driver) Put(ctx context.Context, key string, value []byte) error {
	if err := d.registerFamily(ctx, metastore.Family(key)); err != nil {
		return err
	}
	return d.mutate(ctx, mutation{key: key, value: value})
}

// CAS writes value under key if its current state satisfies expect.
func (d *Driver) CAS(ctx context.Context, key string, expect metastore.Expect, value []byte) error {
	if err := d.registerFamily(ctx, metastore.Family(key)); err != nil {
		return err
	}
	return d.mutate(ctx, mutation{key: key, expect: &expect, value: value})
}

// Delete removes key if it holds exactly expected.
func (d *Driver) Delete(ctx context.Context, key string, expected []byte) error {
	e := metastore.ExpectValue(expected)
	return d.mutate(ctx, mutation{key: key, expect: &e, del: true})
}

// GuardedMutate applies target if the guard and target.Expect hold, in one
// transaction: a ConditionCheck on the guard and the target's write(s).
func (d *Driver) GuardedMutate(ctx context.Context, guard metastore.Guard, target metastore.Mutation) error {
	if !target.Delete {
		if err := d.registerFamily(ctx, metastore.Family(target.Key)); err != nil {
			return err
		}
	}
	e := target.Expect
	return d.mutate(ctx, mutation{key: target.Key, expect: &e, value: target.Value, del: target.Delete, guard: &guard})
}

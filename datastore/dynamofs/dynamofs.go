// Package dynamofs is the DynamoDB datastore driver: one table,
// TABLE_files beside the metastore's dynamodb://TABLE, PAY_PER_REQUEST,
// created by `lake data init`.
//
// # Items
//
// NB: key shapes and attribute names are the table format; they must not
// change. HASH key "pk" (S), RANGE key "sk" (S), and one local secondary
// index "bypos" (HASH pk, RANGE "pos" (N), all attributes projected). An LSI,
// unlike a GSI, is read with ConsistentRead: the pull path never reads an
// index that lags.
//
//	f#PARTITION   PATH            a path's latest state (pos, del, ver, size, chunks, sha, meta, t); in bypos by pos
//	x#SS          PARTITION       the partition's head: seq, floor, and pos = its index position in shard SS
//	n#SS          n               shard SS's index counter n
//	r#SS          r               the registry shard: parts, a string set
//	c#VERSION     00000042        chunk 42 of VERSION: d
//	g#SS          i#MS#VERSION    an upload intent (path) since MS
//	g#SS          g#MS#VERSION    a version replaced at MS (chunks)
//	g#SS          t#MS#HASH       a tombstone written at MS (path, pos)
//	k#DIR         KEY             a lock record (v; w: the token of the write that put it, see CASRecord): DIR is KEY up to its last "/"
//	s#NS#f#…, s#NS#x#SS, …        namespace NS's items: every pk above but k#, prefixed
//
// SS is a shard, two digits, FNV-1a of the partition (or version, or path)
// modulo 16.
//
// # Namespaces
//
// The root namespace ("", the default) is the layout above, unprefixed, as
// tables held it before namespaces. Namespace NS (a user's, or an internal
// scope such as "_catalog"; never containing '#') prefixes every pk but a
// record's with "s#NS#": its files, chunks, heads, shard counters,
// registry and reclaim entries are item collections of its own, so commits
// in two namespaces never touch one item (not even a shard counter), and
// Reclaim, Partitions and ChangedPartitions of one namespace read only its
// items. Records (k#) are not prefixed: every namespace's lock records are
// the root's, and a commit in any namespace can be fenced on any of them.
//
// # DropPartition
//
// Reads the head (GetItem) and the partition's files (Query), then sends
// TransactWriteItems of at most 100 items, each with the fence's
// ConditionCheck: per file its delete (condition: the pos read) and its
// tombstone's purge entry's delete or its live version's g# reclaim entry;
// the last one also deletes the head (condition: the seq read; with no head
// read, a ConditionCheck that none holds a seq) and DELETEs the partition
// from its registry set. A commit racing the drop fails a
// condition and the drop returns a conflict; a second call finishes a
// partial drop.
//
// # Commit
//
// One TransactWriteItems: the fence's ConditionCheck, each path's item put
// under a condition on the position it had when read, each upload intent
// deleted (condition: it still exists), each replaced version and tombstone
// recorded for Reclaim, each partition's head moved to its new seq (condition:
// the seq read) and each shard counter moved (condition: the value read),
// and a partition whose head held no seq ADDed to its registry set
// (registry.go: a partition with a seq is registered already). A
// failed condition other than the fence or an intent means another commit
// won the race: the commit re-reads and tries again. Every commit of a
// partition therefore serializes on its head, positions are dense, and each
// transaction completes before the next one of its partition can start. A
// commit of more than MaxCommit entries whose items do not fit in one
// transaction is staged under a commit record (o#ID) and made visible by
// one conditional write (whole.go).
//
// # Pull
//
// Changes reads the head with a strongly consistent GetItem, then queries
// bypos for pos in (after, seq] with ConsistentRead: an entry at or below a
// seq that a serializable read saw belongs to a committed transaction, so a
// Query started afterwards sees it; entries of a commit still in flight lie
// above seq and wait for the next pull. Items read = changes + 1.
// ChangedPartitions reads the 16 shard counters in one BatchGetItem and
// queries only the shards whose counter moved.
package dynamofs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/offers"
	"github.com/lakemeta/lake/metastore"
)

// TableSuffix is appended to the metastore's table name to name the
// datastore's table. NB: must not change.
const TableSuffix = "_files"

// Name is the backend name carried by this driver's cursors.
const Name = "dynamodb"

// Shards is the number of registry, index and reclaim shards. NB: must not
// change for an existing table.
const Shards = 16

// maxCommit keeps a worst-case commit (each entry in its own partition and
// replacing a version: 3 items an entry, plus a head each, plus one clash
// ConditionCheck each (clash.go), plus 16 shard counters and the fence)
// within TransactWriteItems's 100 items.
const maxCommit = 16

// Attribute and index names. NB: part of the table format.
const (
	attrPK, attrSK = "pk", "sk"
	attrPos        = "pos"
	indexByPos     = "bypos"
)

// Options configure Open.
type Options struct {
	// Table is the datastore's table (the metastore's table + TableSuffix).
	Table string
	// Retryer decides which failures are retried; nil means
	// ddb.NewRetryer's defaults.
	Retryer aws.Retryer
	// MaxCommit is the most entries a commit applies in one
	// TransactWriteItems (the fast path) whatever they need; a larger
	// commit is one transaction too when its items fit (fitsOneTx), and
	// otherwise staged under a commit record (whole.go). Zero means 16;
	// tests lower it, which stages every larger commit.
	MaxCommit int
	// CommitWindow is how long a staged commit that was never flipped is
	// taken for one in flight; after it the next writer of its paths or a
	// reclaim gives it up. Zero means 5 minutes.
	CommitWindow time.Duration
}

// Driver is the DynamoDB implementation of datastore.Driver: the root
// namespace of a table, or one of its namespaces (Namespace).
type Driver struct {
	*shared
	// ns is the namespace ("" for the root) and pfx the prefix of every
	// non-record pk in it ("" for the root, so existing tables keep their
	// layout).
	ns, pfx string
}

// shared is what every namespace of one table shares: the client, the
// registration cache and the meter.
type shared struct {
	api        ddb.API
	table      string
	retryer    aws.Retryer
	registered sync.Map // namespace NUL partition → struct{}: joined the registry
	// claimed caches the directory claims seen (claims.go): namespace NUL
	// partition NUL model → struct{}.
	claimed sync.Map
	// layout is the datastore's partition rule (SetLayout, layout.go),
	// one for every namespace.
	layout datastore.Layout
	meter  meter
	// maxCommit, window and fault: see Options and whole.go.
	maxCommit int
	window    time.Duration
	fault     faultHook
	// moves: the last commits' index moves and the counters last read
	// (cursorover.go).
	moves moveLog
	// seen: the shard counters last read (predict.go).
	seen seenCounters
	// recent: the runs of recent paths ChangedPartitions read in heads,
	// by namespace prefix and partition, for the feed read that follows
	// (recentpaths.go).
	recent *offers.Shelf[recentRun]
	// noFeedsByKeys: ChangesOfKeys answers nothing (set by the tests of
	// the feed's Queries, export_test.go).
	noFeedsByKeys bool
}

var _ datastore.Driver = (*Driver)(nil)

// Open returns a driver over an existing table.
func Open(ctx context.Context, api ddb.API, o Options) (*Driver, error) {
	if o.Table == "" {
		return nil, fmt.Errorf("%w: no table name", metastore.ErrInvalidArgument)
	}
	if o.Retryer == nil {
		o.Retryer = ddb.NewRetryer(ddb.RetryOptions{})
	}
	d := &Driver{shared: &shared{api: api, table: o.Table, retryer: o.Retryer, maxCommit: maxCommit, window: defaultCommitWindow,
		recent: offers.New[recentRun](recentAge)}}
	if o.MaxCommit > 0 {
		d.maxCommit = min(o.MaxCommit, maxCommit)
	}
	if o.CommitWindow > 0 {
		d.window = o.CommitWindow
	}
	// Opening sends no request: every `lake data sync` is a new process,
	// and a DescribeTable per process was a round trip on the sync's hot
	// path that proved nothing the first real request does not. A missing
	// table is reported by that first request instead: every request's
	// error goes through classify, which turns ResourceNotFoundException
	// into an error naming the table and the way out.
	_ = ctx
	return d, nil
}

// TableInput describes the datastore's table: PAY_PER_REQUEST, keys pk and
// sk, and the local secondary index bypos.
func TableInput(table string) *dynamodb.CreateTableInput {
	s := func(n string) *string { return aws.String(n) }
	return &dynamodb.CreateTableInput{
		TableName:   s(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: s(attrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: s(attrSK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: s(attrPos), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: s(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: s(attrSK), KeyType: types.KeyTypeRange},
		},
		LocalSecondaryIndexes: []types.LocalSecondaryIndex{{
			IndexName: s(indexByPos),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: s(attrPK), KeyType: types.KeyTypeHash},
				{AttributeName: s(attrPos), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}},
	}
}

// Create creates the table if it does not exist and waits until it is ACTIVE.
func Create(ctx context.Context, api ddb.API, table string) error {
	_, err := api.CreateTable(ctx, TableInput(table))
	var inUse *types.ResourceInUseException
	if err != nil && !asErr(err, &inUse) {
		return fmt.Errorf("lake: create table %s: %w", table, err)
	}
	w := dynamodb.NewTableExistsWaiter(api, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 2*time.Minute); err != nil {
		return fmt.Errorf("lake: wait for table %s: %w", table, err)
	}
	return nil
}

// Name returns "dynamodb".
func (d *Driver) Name() string { return Name }

// Table returns the table name.
func (d *Driver) Table() string { return d.table }

// MaxCommit returns the most entries of one atomic commit.
func (d *Driver) MaxCommit() int { return d.maxCommit }

// Close releases nothing: the client is the caller's.
func (d *Driver) Close() error { return nil }

// ShardOf returns the shard of a partition's head in the index and
// registry: tests and tools that need partitions sharing one (or not).
func ShardOf(partition string) string { return shard(partition) }

func shard(s string) string {
	h := fnv.New32a()
	h.Write([]byte(s))
	return fmt.Sprintf("%02d", h.Sum32()%Shards)
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str(pk), attrSK: str(sk)}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n uint64) types.AttributeValue { return &types.AttributeValueMemberN{Value: fmt.Sprint(n)} }

// pk prefixes a non-record pk with d's namespace.
func (d *Driver) pk(s string) string { return d.pfx + s }

func (d *Driver) filePK(partition string) string { return d.pk("f#" + partition) }
func (d *Driver) headKey(partition string) item {
	return key(d.headPK(shard(partition)), partition)
}
func (d *Driver) headPK(sh string) string       { return d.pk("x#" + sh) }
func (d *Driver) counterKey(sh string) item     { return key(d.pk("n#"+sh), "n") }
func (d *Driver) registryKey(sh string) item    { return key(d.pk("r#"+sh), "r") }
func (d *Driver) reclaimPK(sh string) string    { return d.pk("g#" + sh) }
func (d *Driver) chunkPK(version string) string { return d.pk("c#" + version) }
func (d *Driver) chunkKey(version string, i int) item {
	return key(d.chunkPK(version), fmt.Sprintf("%08d", i))
}

// ms renders t as 13-digit unix milliseconds, so that sort keys order by time.
func ms(t time.Time) string { return fmt.Sprintf("%013d", max(t.UnixMilli(), 0)) }

func (d *Driver) intentKey(s datastore.Staged) item {
	return key(d.reclaimPK(shard(s.Version)), "i#"+ms(s.Started)+"#"+s.Version)
}

// garbageKey is the reclaim entry of version, replaced at t.
func (d *Driver) garbageKey(version string, t time.Time) item {
	return key(d.reclaimPK(shard(version)), "g#"+ms(t)+"#"+version)
}

// tombKey is the purge entry of path's tombstone written at t.
func (d *Driver) tombKey(path string, t time.Time) item {
	h := sha256.Sum256([]byte(path))
	return key(d.reclaimPK(shard(path)), "t#"+ms(t)+"#"+hex.EncodeToString(h[:12]))
}

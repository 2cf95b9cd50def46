package iam

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// The roles Generate knows.
const (
	RoleNode             = "node"
	RoleReader           = "reader"
	RoleMigrator         = "migrator"
	RoleSyncWorker       = "sync-worker"
	RoleReshape          = "reshape"
	RoleDenyLegacyWrites = "deny-legacy-writes"
)

// Roles lists the roles, in the order the docs present them.
var Roles = []string{RoleNode, RoleReader, RoleMigrator, RoleSyncWorker, RoleReshape, RoleDenyLegacyWrites}

// Migration states of a DynamoDB store, as `lake dynamo-migrate status`
// names them, and StateStandalone for a v2 table made without a migration.
const (
	StateV1         = "v1"
	StateDual       = "dual"
	StateBackfill   = "backfill"
	StateV2Auth     = "v2-authoritative"
	StateV2Only     = "v2-only"
	StateStandalone = "standalone-v2"
)

var states = []string{StateV1, StateDual, StateBackfill, StateV2Auth, StateV2Only, StateStandalone}

// Params name the store and the account a policy is for.
type Params struct {
	// Partition (default aws), Region and Account make the ARNs.
	Partition, Region, Account string
	// Table is the metastore table of a dynamodb://TABLE store (its v2
	// companion TABLE_prefix_v2 and the datastore's TABLE_files follow);
	// Bucket and Prefix name an s3://BUCKET/PREFIX store. Exactly one.
	Table          string
	Bucket, Prefix string
	// State is the DynamoDB store's migration state (one of the State
	// constants).
	State string
	// Namespace is the sync worker's namespace ("default" is the root).
	Namespace string
	// ReshapeTable is the table the reshape role reshapes.
	ReshapeTable string
}

func (p Params) check(role string) error {
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
	if p.Region == "" {
		bad("no region: set AWS_REGION or pass --region")
	}
	if p.Account == "" || strings.Trim(p.Account, "0123456789") != "" || len(p.Account) != 12 {
		bad("account %q: want the 12 digits of an AWS account (--account, or AWS_ACCOUNT_ID)", p.Account)
	}
	switch {
	case p.Table != "" && p.Bucket != "":
		bad("a DynamoDB table and an S3 bucket: a policy is for one store")
	case role == RoleReshape:
		if p.ReshapeTable == "" {
			bad("reshape needs the table it reshapes (--table)")
		}
	case p.Table == "" && p.Bucket == "":
		bad("no store: --store dynamodb://TABLE or s3://BUCKET/PREFIX")
	case p.Bucket != "" && role != RoleSyncWorker && role != RoleNode && role != RoleReader:
		bad("role %s is for a DynamoDB store, not s3://%s", role, p.Bucket)
	}
	if p.Table != "" && role != RoleReshape && !slices.Contains(states, p.State) {
		bad("migration state %q: want one of %s", p.State, strings.Join(states, ", "))
	}
	if role == RoleSyncWorker {
		if p.Namespace == "" {
			bad("sync-worker needs --namespace")
		} else if p.Namespace != datastore.DefaultNamespace {
			if err := datastore.ValidateNamespace(p.Namespace); err != nil {
				bad("%v", err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: iam policy %s: %s", metastore.ErrInvalidArgument, role, strings.Join(errs, "; "))
	}
	return nil
}

// Generate returns the least-privilege policy of role for the store p
// names in its current state. See docs/iam.md for each role.
func Generate(role string, p Params) (Document, error) {
	if p.Partition == "" {
		p.Partition = "aws"
	}
	if !slices.Contains(Roles, role) {
		return Document{}, fmt.Errorf("%w: iam policy: unknown role %q; the roles are %s", metastore.ErrInvalidArgument, role, strings.Join(Roles, ", "))
	}
	if err := p.check(role); err != nil {
		return Document{}, err
	}
	var st []Statement
	switch role {
	case RoleNode:
		st = p.node()
	case RoleReader:
		st = p.reader()
	case RoleMigrator:
		st = p.migrator()
	case RoleSyncWorker:
		if p.Bucket != "" {
			st = p.s3SyncWorker()
		} else {
			st = p.dynamoSyncWorker()
		}
	case RoleReshape:
		st = p.reshape()
	case RoleDenyLegacyWrites:
		if p.State == StateStandalone {
			return Document{}, fmt.Errorf("%w: iam policy deny-legacy-writes: a standalone v2 store has no v1 table", metastore.ErrInvalidArgument)
		}
		st = p.denyLegacy()
	}
	return Document{Version: "2012-10-17", Statement: st}, nil
}

// The DynamoDB actions, grouped as the roles use them. Transactions are
// authorized on each item's own action (ConditionCheckItem for a check).
var (
	itemReads  = []string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:ConditionCheckItem"}
	itemWrites = []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
	scan       = []string{"dynamodb:Scan"}
	describe   = []string{"dynamodb:DescribeTable"}
)

func (p Params) arn(table string) string {
	return fmt.Sprintf("arn:%s:dynamodb:%s:%s:table/%s", p.Partition, p.Region, p.Account, table)
}

func (p Params) v1() string    { return p.Table }
func (p Params) v2() string    { return p.Table + "_prefix_v2" }
func (p Params) files() string { return p.Table + "_files" }

// usesV1 says lake's nodes read and write the v1 table in the store's
// state (the v2 table they use in every state: a node running in state v1
// is switched to dual by the migrator while it runs, so its policy already
// allows the v2 table).
func (p Params) usesV1() bool { return p.State != StateV2Only && p.State != StateStandalone }

func stmt(sid, why string, actions []string, resources ...string) Statement {
	return Statement{Sid: sid, Effect: "Allow", Action: slices.Concat(actions), Resource: resources, Why: why}
}

// leading conditions a statement on the items' partition keys.
func leading(s Statement, patterns ...string) Statement {
	s.Condition = map[string]map[string][]string{"ForAllValues:StringLike": {"dynamodb:LeadingKeys": patterns}}
	return s
}

// controlKeys are the partition keys of lake's control records in the
// metastore tables (the migration record, layout parameters, registries).
var controlKeys = []string{metastore.ControlPrefix + "*"}

func (p Params) node() []Statement {
	if p.Bucket != "" {
		return p.s3Whole("Node", "the node serves the datastore of the whole store: every namespace, the catalog and the lock records")
	}
	var out []Statement
	if p.usesV1() {
		out = append(out, stmt("MetastoreV1", "reads (Scan for a v1 prefix read), writes and transactions of the legacy table, the authority until finalize and mirrored until retire-v1",
			slices.Concat(itemReads, itemWrites, scan, describe), p.arn(p.v1())))
	} else {
		out = append(out, leading(stmt("MetastoreV1Control", "the migration record a store reads at open and the node registry's heartbeats, which stay on the retired v1 table's control records (absent is fine)",
			slices.Concat(itemReads, itemWrites), p.arn(p.v1())), controlKeys...))
	}
	out = append(out, stmt("MetastoreV2", "point reads, per-shard Query prefix reads, writes and transactions of the prefix-isolated table (and, in state v1, what dual mode adds when the migrator switches it)",
		slices.Concat(itemReads, itemWrites, describe), p.arn(p.v2())))
	out = append(out, stmt("Datastore", "the node's datastore endpoints over TABLE_files: every namespace, its feed index bypos, lock records",
		slices.Concat(itemReads, itemWrites, describe), p.arn(p.files()), p.arn(p.files())+"/index/bypos"))
	return out
}

func (p Params) reader() []Statement {
	if p.Bucket != "" {
		return []Statement{
			stmt("DatastoreRead", "reads of every object of the store", []string{"s3:GetObject"}, p.s3ARN(p.pre()+"*")),
			withPrefix(stmt("DatastoreList", "listings under the store's prefix", []string{"s3:ListBucket"}, p.bucketARN()), p.pre()+"*"),
		}
	}
	reads := []string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"}
	var out []Statement
	if p.usesV1() {
		out = append(out, stmt("MetastoreV1Read", "point reads and v1 prefix reads (a Scan with a filter) of the legacy table",
			slices.Concat(reads, scan, describe), p.arn(p.v1())))
	} else {
		out = append(out, leading(stmt("MetastoreV1Probe", "the migration record a store reads at open, on the retired v1 table",
			[]string{"dynamodb:GetItem"}, p.arn(p.v1())), controlKeys...))
	}
	out = append(out, stmt("MetastoreV2Read", "point reads and per-shard Query prefix reads of the prefix-isolated table (the layout record in state v1)",
		slices.Concat(reads, describe), p.arn(p.v2())))
	out = append(out, stmt("DatastoreRead", "datastore reads: files, heads, the feed index bypos",
		slices.Concat(reads, describe), p.arn(p.files()), p.arn(p.files())+"/index/bypos"))
	return out
}

func (p Params) migrator() []Statement {
	tables := []string{p.arn(p.v1()), p.arn(p.v2())}
	return []Statement{
		stmt("MigrateTables", "create the v2 table, enable the v1 table's stream and TTL, read and write both tables (backfill, verify, the barrier and the marker in one transaction), delete v1 at retire-v1 --delete-table",
			slices.Concat(itemReads, itemWrites, scan, describe, []string{"dynamodb:CreateTable", "dynamodb:UpdateTable", "dynamodb:UpdateTimeToLive", "dynamodb:DeleteTable"}),
			tables...),
		stmt("MigrateStream", "finalize re-checks every key the v1 table's stream names since verify",
			[]string{"dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"}, p.arn(p.v1())+"/stream/*"),
	}
}

// syncKeys are the partition keys of TABLE_files a sync worker of
// namespace ns reads and writes (datastore/dynamofs's layout): the
// namespace's own items (o#: the records of commits of any size), its lock records, the shared catalog scope and the
// root records of the namespace and catalog registries.
func syncKeys(ns string) []string {
	own := []string{"s#" + ns + "#*"}
	if ns == datastore.DefaultNamespace {
		// The root namespace is unprefixed: one pattern per kind.
		own = []string{"f#*", "x#*", "n#*", "r#*", "c#*", "g#*", "o#*"}
	}
	return slices.Concat(own,
		[]string{"k#rec/" + ns, "k#exp/" + ns, "k#gen/" + ns},
		[]string{"s#" + datastore.CatalogScope + "#*", "k#datastore/catalog", "k#datastore/namespaces"})
}

func (p Params) dynamoSyncWorker() []Statement {
	return []Statement{
		leading(stmt("NamespaceItems", "the namespace's files, chunks, feed and heads, its lock records (k#rec/, k#exp/, k#gen/), the catalog scope every namespace's commits fold into, and the namespace and catalog registries; never Scan, which no key condition bounds",
			slices.Concat(itemReads, itemWrites), p.arn(p.files()), p.arn(p.files())+"/index/bypos"), syncKeys(p.Namespace)...),
		leading(stmt("Layout", "the datastore's layout record, read when a tree does not remember it and checked by a ConditionCheck in each commit's transaction (a commit under a stale layout is refused whole), never written: `lake data init` records it (docs/datastore.md)",
			[]string{"dynamodb:GetItem", "dynamodb:ConditionCheckItem"}, p.arn(p.files())), "k#"+datastore.LayoutKey),
	}
}

func (p Params) bucketARN() string { return "arn:" + p.Partition + ":s3:::" + p.Bucket }

// pre is the store's key prefix with its slash ("" for a bucket's root).
func (p Params) pre() string {
	if p.Prefix == "" {
		return ""
	}
	return p.Prefix + "/"
}
func (p Params) s3ARN(key string) string {
	return p.bucketARN() + "/" + key
}

func withPrefix(s Statement, prefixes ...string) Statement {
	s.Condition = map[string]map[string][]string{"StringLike": {"s3:prefix": prefixes}}
	return s
}

func (p Params) s3Whole(sid, why string) []Statement {
	return []Statement{
		stmt(sid+"Objects", why, []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}, p.s3ARN(p.pre()+"*")),
		withPrefix(stmt(sid+"List", "listings of logs, heads, intents and records under the store's prefix", []string{"s3:ListBucket"}, p.bucketARN()), p.pre()+"*"),
	}
}

func (p Params) s3SyncWorker() []Statement {
	pre := p.pre()
	ns := p.Namespace
	own := pre + "n/" + ns + "/"
	if ns == datastore.DefaultNamespace {
		own = pre
	}
	cat := pre + "n/" + datastore.CatalogScope + "/"
	objects := []string{p.s3ARN(cat + "*"),
		p.s3ARN(pre + "r/rec/" + ns + "/*"), p.s3ARN(pre + "r/exp/" + ns + "/*"), p.s3ARN(pre + "r/gen/" + ns + "~"),
		p.s3ARN(pre + "r/datastore/catalog/" + ns + "~"), p.s3ARN(pre + "r/datastore/namespaces/" + ns + "~")}
	lists := []string{cat + "*", pre + "r/rec/" + ns + "/*", pre + "r/exp/" + ns + "/*", pre + "h/"}
	if ns == datastore.DefaultNamespace {
		// The root namespace's objects are the store's top-level kinds.
		for _, k := range []string{"c", "u", "v", "q", "l", "h", "f", "p", "t", "x"} {
			objects = append(objects, p.s3ARN(pre+k+"/*"))
			lists = append(lists, pre+k+"/*")
		}
	} else {
		objects = append(objects, p.s3ARN(own+"*"))
		lists = append(lists, own+"*")
	}
	return []Statement{
		stmt("NamespaceObjects", "the namespace's chunks, logs, heads and index, its lock records (r/rec/, r/exp/, r/gen/), the catalog scope every namespace's commits fold into, and its entries in the namespace and catalog registries",
			[]string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}, objects...),
		withPrefix(stmt("NamespaceList", "listings of the namespace's logs, heads and intents, the catalog's, and the root heads a namespace's registry is found from",
			[]string{"s3:ListBucket"}, p.bucketARN()), lists...),
		stmt("Layout", "the datastore's layout record, read once per open, never written: `lake data init` records it (docs/datastore.md)",
			[]string{"s3:GetObject"}, p.s3ARN(pre+"r/"+datastore.LayoutKey+"~")),
	}
}

func (p Params) reshape() []Statement {
	t := p.arn(p.ReshapeTable)
	return []Statement{
		stmt("ReshapeTable", "describe the table, add the index (UpdateTable), sweep it (parallel Scan), convert each item with one conditional UpdateItem, copy and delete items of a key rewrite in transactions (Put, Delete, ConditionCheck), read items again after a failed condition, and verify an item and its copy together (TransactGetItems, authorized by GetItem)",
			slices.Concat([]string{"dynamodb:DescribeTable", "dynamodb:UpdateTable", "dynamodb:Scan", "dynamodb:GetItem", "dynamodb:UpdateItem",
				"dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"}), t),
		stmt("ReshapeIndex", "verify queries the new index for a sample of its keys", []string{"dynamodb:Query"}, t+"/index/*"),
	}
}

func (p Params) denyLegacy() []Statement {
	s := stmt("DenyLegacyWrites", "a legacy (v1-only) writer ignores the migration's barrier: its writes after the verify are only caught while finalize reads the stream, and after the marker they are lost to v2. Attach to every role that is not one of lake's (dual-capable) nodes or migrator before finalize, and to every role after retire-v1",
		itemWrites, p.arn(p.v1()))
	s.Effect = "Deny"
	s.Action = append(s.Action, "dynamodb:PartiQLInsert", "dynamodb:PartiQLUpdate", "dynamodb:PartiQLDelete")
	s.Rare = "a deny is never used by lake's own workload: it is checked by a legacy writer's requests being refused"
	return []Statement{s}
}

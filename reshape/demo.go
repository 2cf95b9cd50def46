package reshape

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
)

// DemoOptions size the demo table.
type DemoOptions struct {
	Workspaces      int // DefaultDemoWorkspaces
	MembersPerWS    int // DefaultDemoMembers
	DocsPerWS       int // DefaultDemoDocs
	CommentsPerDoc  int // DefaultDemoComments
	Seed            uint64
	TableWaitPeriod time.Duration // poll period while the table is CREATING (1s)
}

// Demo defaults.
const (
	DefaultDemoWorkspaces = 3
	DefaultDemoMembers    = 8
	DefaultDemoDocs       = 4
	DefaultDemoComments   = 12
)

// DemoResult is what Demo wrote, and the seed's first query run on it.
type DemoResult struct {
	Items    int
	Comments int
	// Listing is the comments of document x7 of workspace a91, read with
	// PK = "WS#a91" AND begins_with(SK, "DOC#2026-04-01#x7#CMT#"): the
	// per-document query the table's keys already serve, before any index.
	ListingQuery string
	Listing      []map[string]types.AttributeValue
}

// The seed's workspace and document, always in the demo.
const (
	DemoWorkspace = "a91"
	DemoDocPrefix = "DOC#2026-04-01#x7"
	DemoMember    = "u44"
)

// Demo creates the seed's SaaS table (PK = "WS#<id>", an overloaded SK: META,
// MEMBER#<id>, DOC#<date>#<docid>, and comments DOC#<date>#<docid>#CMT#<time>#<id>
// as new items in the workspace partition) and fills it, comments included,
// before any index exists; the table MUST not exist. It then lists the
// comments of one document with begins_with, the query the keys serve on day
// one. Every comment carries commentId, memberId, createdAt and body, and
// none carries GSI1PK/GSI1SK: they are the old items a new index would omit.
func Demo(ctx context.Context, api API, table string, opts DemoOptions) (DemoResult, error) {
	o := opts.withDefaults()
	var res DemoResult
	_, err := api.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("PK"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("SK"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("PK"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("SK"), KeyType: types.KeyTypeRange},
		},
	})
	var inUse *types.ResourceInUseException
	if errors.As(err, &inUse) {
		return res, fmt.Errorf("%w: reshape demo: table %s exists; the demo creates its own table", metastore.ErrRefused, table)
	}
	if err != nil {
		return res, fmt.Errorf("lake: reshape demo: create table %s: %w", table, err)
	}
	if err := waitTable(ctx, api, table, o.TableWaitPeriod); err != nil {
		return res, err
	}
	items := DemoItems(o)
	if err := putAll(ctx, api, table, items); err != nil {
		return res, err
	}
	res.Items = len(items)
	for _, it := range items {
		if _, ok := it["commentId"]; ok {
			res.Comments++
		}
	}
	keyCond := expression.KeyAnd(expression.Key("PK").Equal(expression.Value("WS#"+DemoWorkspace)),
		expression.Key("SK").BeginsWith(DemoDocPrefix+"#CMT#"))
	expr, err := expression.NewBuilder().WithKeyCondition(keyCond).Build()
	if err != nil {
		return res, err
	}
	res.ListingQuery = fmt.Sprintf("Query PK = %q AND begins_with(SK, %q)", "WS#"+DemoWorkspace, DemoDocPrefix+"#CMT#")
	out, err := api.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(table), KeyConditionExpression: expr.KeyCondition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return res, fmt.Errorf("lake: reshape demo: list comments: %w", err)
	}
	res.Listing = out.Items
	return res, nil
}

func (o DemoOptions) withDefaults() DemoOptions {
	if o.Workspaces <= 0 {
		o.Workspaces = DefaultDemoWorkspaces
	}
	if o.MembersPerWS <= 0 {
		o.MembersPerWS = DefaultDemoMembers
	}
	if o.DocsPerWS <= 0 {
		o.DocsPerWS = DefaultDemoDocs
	}
	if o.CommentsPerDoc <= 0 {
		o.CommentsPerDoc = DefaultDemoComments
	}
	if o.TableWaitPeriod <= 0 {
		o.TableWaitPeriod = time.Second
	}
	return o
}

// DemoItems returns the demo table's items: per workspace a META item,
// members, documents and their comments. Workspace 0 is a91, its first
// member u44 and its first document DOC#2026-04-01#x7, the seed's.
func DemoItems(opts DemoOptions) []map[string]types.AttributeValue {
	o := opts.withDefaults()
	rng := rand.New(rand.NewPCG(o.Seed, 0x5eed))
	var items []map[string]types.AttributeValue
	base := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	for w := range o.Workspaces {
		ws := fmt.Sprintf("w%02d", w)
		if w == 0 {
			ws = DemoWorkspace
		}
		pk := "WS#" + ws
		items = append(items, av("PK", pk, "SK", "META", "name", "Workspace "+ws))
		members := make([]string, o.MembersPerWS)
		for m := range members {
			members[m] = fmt.Sprintf("u%d%02d", w+1, m)
			if w == 0 && m == 0 {
				members[m] = DemoMember
			}
			items = append(items, av("PK", pk, "SK", "MEMBER#"+members[m], "memberId", members[m], "name", "Member "+members[m]))
		}
		for d := range o.DocsPerWS {
			day := base.AddDate(0, 0, d)
			doc := fmt.Sprintf("d%d", d)
			if d == 0 {
				doc = "x7"
			}
			docSK := "DOC#" + day.Format(time.DateOnly) + "#" + doc
			items = append(items, av("PK", pk, "SK", docSK, "title", "Document "+doc, "ownerId", members[d%len(members)]))
			for c := range o.CommentsPerDoc {
				at := day.Add(time.Duration(c)*17*time.Minute + time.Duration(rng.IntN(60))*time.Second)
				items = append(items, DemoComment(ws, docSK, fmt.Sprintf("c%d%d%03d", w, d, c), members[rng.IntN(len(members))], at))
			}
		}
	}
	return items
}

// DemoComment returns one comment item of document docSK in workspace ws, as
// the old write path wrote it (no GSI1 attributes).
func DemoComment(ws, docSK, id, member string, at time.Time) map[string]types.AttributeValue {
	ts := at.UTC().Format(time.RFC3339)
	return av("PK", "WS#"+ws, "SK", docSK+"#CMT#"+ts+"#"+id,
		"commentId", id, "memberId", member, "createdAt", ts, "body", "comment "+id+" by "+member)
}

func av(kv ...string) map[string]types.AttributeValue {
	m := make(map[string]types.AttributeValue, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = &types.AttributeValueMemberS{Value: kv[i+1]}
	}
	return m
}

// putAll writes items with BatchWriteItem, 25 at a time, resending what
// DynamoDB leaves unprocessed.
func putAll(ctx context.Context, api API, table string, items []map[string]types.AttributeValue) error {
	for i := 0; i < len(items); i += 25 {
		var reqs []types.WriteRequest
		for _, it := range items[i:min(i+25, len(items))] {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
		}
		pending := map[string][]types.WriteRequest{table: reqs}
		// Unprocessed items are sent again under lake's DynamoDB retry
		// policy: bounded, with backoff.
		r := ddb.NewRetryer(ddb.RetryOptions{})
		for attempt := 1; len(pending) > 0; attempt++ {
			out, err := api.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
			if err != nil {
				return fmt.Errorf("lake: reshape demo: write items: %w", err)
			}
			pending = out.UnprocessedItems
			if len(pending) == 0 {
				break
			}
			if attempt >= r.MaxAttempts() {
				return fmt.Errorf("lake: reshape demo: %d items stayed unprocessed after %d BatchWriteItem attempts", len(pending[table]), attempt)
			}
			delay, _ := r.RetryDelay(attempt, errUnprocessed)
			if err := ddb.Sleep(ctx, delay); err != nil {
				return err
			}
		}
	}
	return nil
}

// errUnprocessed stands for the failure a retryer's backoff is asked about
// when a batch left items unprocessed.
var errUnprocessed = errors.New("unprocessed items")

// waitTable polls until the table is ACTIVE.
func waitTable(ctx context.Context, api API, table string, period time.Duration) error {
	for {
		out, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return fmt.Errorf("lake: reshape demo: describe table %s: %w", table, err)
		}
		if out.Table.TableStatus == types.TableStatusActive {
			return nil
		}
		if err := ddb.Sleep(ctx, period); err != nil {
			return err
		}
	}
}

// demoSpecJSON is examples/reshape/saas-comments.json with the table left
// open; a test keeps the two equal.
const demoSpecJSON = `{
  "kind": "add-index",
  "table": %q,
  "index": {
    "name": "GSI1",
    "type": "global",
    "partitionKey": {"attribute": "GSI1PK", "type": "S"},
    "sortKey": {"attribute": "GSI1SK", "type": "S"},
    "projection": "ALL"
  },
  "covers": {
    "keyPrefixes": {"PK": "WS#", "SK": "DOC#"},
    "present": ["commentId"]
  },
  "derive": {
    "GSI1PK": "MEMBER#{memberId}",
    "GSI1SK": "CMT#{createdAt}#{commentId}"
  },
  "timestamp": "createdAt"
}
`

// DemoSpec returns the demo's spec (the shipped example) for table.
func DemoSpec(table string) (*Spec, error) { return Parse(fmt.Appendf(nil, demoSpecJSON, table)) }

package syncload

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/ddb"
)

// The store's own view of the load: DynamoDB Local has no partitions and
// never throttles, so a hot partition cannot be seen as throttling; it is
// seen as each partition key's share of the requests the driver sends, and
// as the items DynamoDB reads. DynamoKeys and S3Keys wrap the narrow client
// a driver uses and charge every request once, and its load to each
// partition key (DynamoDB) or key prefix (S3) it addresses, to the worker
// whose call it serves: the worker's meter rides in the call's context.

type tallyKey struct{}

// withTally makes the store-level requests of ctx count for m.
func withTally(ctx context.Context, m *meter) context.Context {
	return context.WithValue(ctx, tallyKey{}, m)
}

// storeRequest counts one request to the store for the worker of ctx
// (nothing when the call is none of a worker's): one a request on the
// wire, however many keys it addresses, as a proxy in front of the store
// counts it (internal/reqcount), so that a figure per sync is comparable
// with the minimum beside it.
func storeRequest(ctx context.Context) {
	m, _ := ctx.Value(tallyKey{}).(*meter)
	if m == nil {
		return
	}
	m.root().mu.Lock()
	defer m.root().mu.Unlock()
	m.root().c.StoreRequests++
}

// storeLoad charges key with the items a request read there (the key's
// load: the items, at least one), for the worker of ctx.
func storeLoad(ctx context.Context, key string, read int64) {
	m, _ := ctx.Value(tallyKey{}).(*meter)
	if m == nil {
		return
	}
	m.root().mu.Lock()
	defer m.root().mu.Unlock()
	// A partition's capacity is spent by the items it reads and writes,
	// not by the requests: a key's load is its items read, at least one
	// per request.
	m.root().c.StoreKeys[key] += max(1, read)
	m.root().c.StoreItemsRead += read
}

// storeNote counts one request addressing key alone, and its load there.
func storeNote(ctx context.Context, key string, read int64) {
	storeRequest(ctx)
	storeLoad(ctx, key, read)
}

// DynamoKeys wraps api so that every request is counted under the
// partition key(s) it addresses (the "pk" attribute of lake's datastore
// table), with DynamoDB's items read (ScannedCount for a query).
func DynamoKeys(api ddb.API) ddb.API { return &ddbKeys{api} }

type ddbKeys struct{ ddb.API }

// pkOf names the partition an item lands in: the seed's GSI partition
// (gsi1pk) for the items of its index, else lake's partition key.
func pkOf(item map[string]types.AttributeValue) string {
	if v, ok := item["gsi1pk"].(*types.AttributeValueMemberS); ok {
		return "gsi1pk:" + v.Value
	}
	if v, ok := item["pk"].(*types.AttributeValueMemberS); ok {
		return "pk:" + v.Value
	}
	return "pk:?"
}

// queryPK finds the value the key condition gives the partition key.
func queryPK(in *dynamodb.QueryInput) string {
	keyAttr := "pk"
	if in.IndexName != nil && *in.IndexName == "gsi1" {
		keyAttr = "gsi1pk" // the seed's GSI
	}
	for name, attr := range in.ExpressionAttributeNames {
		if attr != keyAttr || in.KeyConditionExpression == nil {
			continue
		}
		expr := *in.KeyConditionExpression
		i := strings.Index(expr, name+" = ")
		if i < 0 {
			continue
		}
		ph := strings.Fields(expr[i+len(name)+3:])
		if len(ph) == 0 {
			continue
		}
		if v, ok := in.ExpressionAttributeValues[strings.TrimRight(ph[0], ")")].(*types.AttributeValueMemberS); ok {
			return keyAttr + ":" + v.Value
		}
	}
	return "pk:?"
}

func (d *ddbKeys) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := d.API.GetItem(ctx, in, o...)
	storeNote(ctx, pkOf(in.Key), 1)
	return out, err
}

func (d *ddbKeys) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := d.API.PutItem(ctx, in, o...)
	storeNote(ctx, pkOf(in.Item), 0)
	return out, err
}

func (d *ddbKeys) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := d.API.UpdateItem(ctx, in, o...)
	storeNote(ctx, pkOf(in.Key), 0)
	return out, err
}

func (d *ddbKeys) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := d.API.Query(ctx, in, o...)
	var read int64
	if out != nil {
		read = int64(out.ScannedCount)
	}
	storeNote(ctx, queryPK(in), read)
	return out, err
}

func (d *ddbKeys) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	out, err := d.API.Scan(ctx, in, o...)
	var read int64
	if out != nil {
		read = int64(out.ScannedCount)
	}
	storeNote(ctx, "scan", read)
	return out, err
}

func (d *ddbKeys) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := d.API.TransactWriteItems(ctx, in, o...)
	storeRequest(ctx)
	for _, k := range distinct(in.TransactItems, func(it types.TransactWriteItem) string {
		switch {
		case it.Put != nil:
			return pkOf(it.Put.Item)
		case it.Update != nil:
			return pkOf(it.Update.Key)
		case it.Delete != nil:
			return pkOf(it.Delete.Key)
		case it.ConditionCheck != nil:
			return pkOf(it.ConditionCheck.Key)
		}
		return "pk:?"
	}) {
		storeLoad(ctx, k, 0)
	}
	return out, err
}

func (d *ddbKeys) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	out, err := d.API.TransactGetItems(ctx, in, o...)
	storeRequest(ctx)
	for _, k := range distinct(in.TransactItems, func(it types.TransactGetItem) string { return pkOf(it.Get.Key) }) {
		storeLoad(ctx, k, 1)
	}
	return out, err
}

func (d *ddbKeys) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := d.API.BatchGetItem(ctx, in, o...)
	storeRequest(ctx)
	for _, ka := range in.RequestItems {
		for _, k := range distinct(ka.Keys, pkOf) {
			storeLoad(ctx, k, 0)
		}
	}
	if out != nil {
		for _, items := range out.Responses {
			for _, it := range items {
				storeLoad(ctx, pkOf(it), 1)
			}
		}
	}
	return out, err
}

func (d *ddbKeys) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	out, err := d.API.BatchWriteItem(ctx, in, o...)
	storeRequest(ctx)
	for _, reqs := range in.RequestItems {
		for _, k := range distinct(reqs, func(r types.WriteRequest) string {
			if r.PutRequest != nil {
				return pkOf(r.PutRequest.Item)
			}
			if r.DeleteRequest != nil {
				return pkOf(r.DeleteRequest.Key)
			}
			return "pk:?"
		}) {
			storeLoad(ctx, k, 0)
		}
	}
	return out, err
}

func distinct[T any](xs []T, key func(T) string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if k := key(x); !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// S3Keys wraps api so that every request is counted under its key prefix
// below the datastore's prefix: the kind of object and, for files and
// heads and logs the partition (f/data/TYPE/ID, h/PART, l/PART), for
// records their directory (r/DIR/NS), for chunks and uploads the kind
// alone, and in a namespace the same prefixed by n/ (n/l/PART, n/q/…); a
// listing counts under "list:" and its prefix.
func S3Keys(api s3fs.API, prefix string) s3fs.API { return &s3Keys{api, prefix} }

type s3Keys struct {
	s3fs.API
	prefix string
}

func (s *s3Keys) class(key string) string {
	k := strings.TrimPrefix(key, s.prefix)
	kind, rest, _ := strings.Cut(k, "/")
	if kind == "n" {
		// A namespace's tree: its kind of object, the namespace's name
		// left out so that the workers' namespaces add up.
		if _, tree, ok := strings.Cut(rest, "/"); ok {
			return "n/" + s.class(s.prefix+tree)
		}
		return "n/"
	}
	segs := map[string]int{"f": 3, "r": 2, "h": 1, "l": 1}[kind]
	if segs == 0 {
		return kind + "/"
	}
	parts := strings.SplitN(rest, "/", segs+1)
	if len(parts) > segs {
		parts = parts[:segs]
	}
	return kind + "/" + strings.TrimSuffix(strings.Join(parts, "/"), "~")
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *s3Keys) PutObject(ctx context.Context, in *s3.PutObjectInput, o ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	out, err := s.API.PutObject(ctx, in, o...)
	storeNote(ctx, s.class(str(in.Key)), 0)
	return out, err
}

func (s *s3Keys) GetObject(ctx context.Context, in *s3.GetObjectInput, o ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	out, err := s.API.GetObject(ctx, in, o...)
	storeNote(ctx, s.class(str(in.Key)), 1)
	return out, err
}

func (s *s3Keys) HeadObject(ctx context.Context, in *s3.HeadObjectInput, o ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	out, err := s.API.HeadObject(ctx, in, o...)
	storeNote(ctx, s.class(str(in.Key)), 1)
	return out, err
}

func (s *s3Keys) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, o ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	out, err := s.API.DeleteObject(ctx, in, o...)
	storeNote(ctx, s.class(str(in.Key)), 0)
	return out, err
}

func (s *s3Keys) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, o ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	out, err := s.API.ListObjectsV2(ctx, in, o...)
	var read int64
	if out != nil {
		read = int64(len(out.Contents))
	}
	storeNote(ctx, "list:"+s.class(str(in.Prefix)), read)
	return out, err
}

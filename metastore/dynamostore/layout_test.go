package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/keyspace"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/lakemeta/lake/metastore/dynamostore"
)

func TestOpenMissingTable(t *testing.T) {
	api := client(t)
	for _, layout := range []dynamostore.Layout{dynamostore.LayoutV1, dynamostore.LayoutV2} {
		name := ddblocal.TableName(t)
		_, err := dynamostore.Open(t.Context(), api, dynamostore.Options{Table: name, Layout: layout})
		if !errors.Is(err, dynamostore.ErrNoTable) || !strings.Contains(err.Error(), name) {
			t.Fatalf("%s: Open of a missing table: %v", layout, err)
		}
	}
}

func TestOptionsRefused(t *testing.T) {
	api := client(t)
	for _, opts := range []dynamostore.Options{
		{Table: ""},
		{Table: "a b"},
		{Table: strings.Repeat("t", 250)},
		{Table: "lake", Layout: "v3"},
	} {
		if _, err := dynamostore.Open(t.Context(), api, opts); !errors.Is(err, metastore.ErrInvalidArgument) {
			t.Errorf("Open(%+v) = %v, want ErrInvalidArgument", opts, err)
		}
	}
}

// TestCreateIsIdempotent: a second Create changes nothing and data survives.
func TestCreateIsIdempotent(t *testing.T) {
	api := client(t)
	opts := newTables(t, api, dynamostore.LayoutV2)
	s := metastore.New(openDriver(t, api, opts))
	if err := s.Put(t.Context(), "tbl/a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := dynamostore.Create(t.Context(), api, opts); err != nil {
		t.Fatalf("second Create: %v", err)
	}
	if v, err := s.Get(t.Context(), "tbl/a"); err != nil || string(v) != "1" {
		t.Fatalf("after second Create: %q, %v", v, err)
	}
}

// TestLayoutParamsFrozen: a process whose shard counts differ from the
// table's refuses to open it and cannot re-create it.
func TestLayoutParamsFrozen(t *testing.T) {
	api := client(t)
	opts := newTables(t, api, dynamostore.LayoutV2)
	other := keyspace.DefaultParams()
	other.Families = map[string]int{"append-operation": 16}
	opts.Params = &other
	if _, err := dynamostore.Open(t.Context(), api, opts); !errors.Is(err, dynamostore.ErrLayoutMismatch) || !errors.Is(err, metastore.ErrRefused) {
		t.Fatalf("Open with other shard counts: %v", err)
	}
	if err := dynamostore.Create(t.Context(), api, opts); !errors.Is(err, dynamostore.ErrLayoutMismatch) {
		t.Fatalf("Create with other shard counts: %v", err)
	}
}

// TestV2PhysicalLayout checks, with a raw client, where v2 puts an item.
func TestV2PhysicalLayout(t *testing.T) {
	api := client(t)
	opts := newTables(t, api, dynamostore.LayoutV2)
	s := metastore.New(openDriver(t, api, opts))
	if err := s.Put(t.Context(), "append-operation/orders/000042", []byte("op")); err != nil {
		t.Fatal(err)
	}
	out, err := api.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName:      aws.String(opts.Table + "_prefix_v2"),
		ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"bucket": &types.AttributeValueMemberS{Value: "append-operation#047"},
			"pk":     &types.AttributeValueMemberS{Value: "append-operation/orders/000042"},
		},
	})
	if err != nil || out.Item == nil {
		t.Fatalf("raw GetItem at the computed bucket: %v, %v", err, out.Item)
	}
	if v := out.Item["v"].(*types.AttributeValueMemberB).Value; string(v) != "op" {
		t.Fatalf("value attribute = %q", v)
	}
}

// load writes r retained records and t catalog keys through the store.
func loadMixed(t *testing.T, s *metastore.Store, catalog, retained int) []string {
	t.Helper()
	var tbl []string
	for i := range catalog {
		k := fmt.Sprintf("tbl/t%03d", i)
		tbl = append(tbl, k)
		if err := s.Put(t.Context(), k, []byte("entry")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range retained {
		var k string
		switch i % 4 {
		case 0, 1:
			k = fmt.Sprintf("append-operation/t%03d/%06d", i%catalog, i)
		case 2:
			k = fmt.Sprintf("lance-manifest/t%03d/%06d", i%catalog, i)
		default:
			k = fmt.Sprintf("lease/t%06d", i)
		}
		if err := s.Put(t.Context(), k, []byte("r")); err != nil {
			t.Fatal(err)
		}
	}
	return tbl
}

// TestPrefixReadCost: a v2 tbl/ read evaluates exactly the items it returns,
// with requests bounded by shards plus pages; v1 evaluates the whole table.
func TestPrefixReadCost(t *testing.T) {
	const catalog, retained = 20, 300
	for _, layout := range []dynamostore.Layout{dynamostore.LayoutV1, dynamostore.LayoutV2} {
		t.Run(string(layout), func(t *testing.T) {
			api := client(t)
			d := openDriver(t, api, newTables(t, api, layout))
			s := metastore.New(d)
			loadMixed(t, s, catalog, retained)
			before := d.Stats()
			items, err := s.ListAll(t.Context(), "tbl/")
			if err != nil || len(items) != catalog {
				t.Fatalf("ListAll(tbl/) = %d items, %v", len(items), err)
			}
			cost := d.Stats().Sub(before)
			if cost.ItemsReturned != catalog {
				t.Fatalf("returned %d, want %d", cost.ItemsReturned, catalog)
			}
			switch layout {
			case dynamostore.LayoutV2:
				if cost.ItemsEvaluated != catalog {
					t.Fatalf("v2 evaluated %d items for %d returned", cost.ItemsEvaluated, catalog)
				}
				if cost.Requests["Scan"] != 0 || cost.Requests["Query"] > keyspace.DefaultShards {
					t.Fatalf("v2 requests %v, want at most %d queries and no scan", cost.Requests, keyspace.DefaultShards)
				}
			case dynamostore.LayoutV1:
				if cost.ItemsEvaluated != catalog+retained {
					t.Fatalf("v1 evaluated %d items, want the whole table %d", cost.ItemsEvaluated, catalog+retained)
				}
			}
			if cost.ReadCapacity <= 0 {
				t.Fatalf("no read capacity reported: %+v", cost)
			}
		})
	}
}

// TestV2PagesNeverExceedLimitPerRequest: every Query asks for at most the
// remaining page limit, so a page of 3 never evaluates more than 3 items.
func TestV2PagesNeverExceedLimitPerRequest(t *testing.T) {
	api := &countingAPI{API: client(t)}
	d := openDriver(t, api, newTables(t, api, dynamostore.LayoutV2))
	s := metastore.New(d)
	loadMixed(t, s, 20, 40)
	api.reset()
	cur := ""
	for {
		page, err := s.List(t.Context(), "tbl/", 3, cur)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) > 3 {
			t.Fatalf("page of %d", len(page.Items))
		}
		if cur = page.Cursor; cur == "" {
			break
		}
	}
	for _, q := range api.queries() {
		if q.limit > 3 || q.scanned > q.limit {
			t.Fatalf("query with limit %d evaluated %d", q.limit, q.scanned)
		}
		if !strings.HasPrefix(q.bucket, "tbl#") {
			t.Fatalf("a tbl/ read queried bucket %q", q.bucket)
		}
	}
}

// TestUnpinnedPrefixUsesRegistry: a prefix without "/" is served from the
// family registry, with queries only, and returns what a scan would.
func TestUnpinnedPrefixUsesRegistry(t *testing.T) {
	api := &countingAPI{API: client(t)}
	d := openDriver(t, api, newTables(t, api, dynamostore.LayoutV2))
	s := metastore.New(d)
	keys := []string{"tbl/a", "tblx/b", "tb", "t", "rootkey", "lease/x", "append-operation/o/1", "root/child"}
	for _, k := range keys {
		if err := s.Put(t.Context(), k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	api.reset()
	for _, p := range []string{"", "t", "tb", "tbl", "r", "root", "l", "z"} {
		items, err := s.ListAll(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for _, it := range items {
			got = append(got, it.Key)
		}
		for _, k := range keys {
			if strings.HasPrefix(k, p) {
				want = append(want, k)
			}
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("ListAll(%q) = %q, want %q", p, got, want)
		}
	}
	if api.scans() != 0 {
		t.Fatalf("%d scans for unpinned prefixes", api.scans())
	}
}

// TestFamilyRegistryConcurrent: processes registering different families at
// the same moment never lose one another's registration.
func TestFamilyRegistryConcurrent(t *testing.T) {
	api := client(t)
	opts := newTables(t, api, dynamostore.LayoutV2)
	var wg sync.WaitGroup
	const n = 16
	for i := range n {
		wg.Go(func() {
			s := metastore.New(openDriver(t, api, opts)) // a process of its own
			if err := s.Put(context.Background(), fmt.Sprintf("fam%02d/k", i), []byte("v")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	s := metastore.New(openDriver(t, api, opts))
	items, err := s.ListAll(t.Context(), "fam")
	if err != nil || len(items) != n {
		t.Fatalf("ListAll(fam) = %d items, %v; want %d", len(items), err, n)
	}
}

// TestLayoutsAgree is the property test: for random key sets, prefixes and
// page limits, bolt, v1 and v2 return exactly the same items when drained,
// each key once and no page over its limit.
func TestLayoutsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	segs := []string{"tbl", "tb", "append-operation", "lance-manifest", "lease", "t", "x", "ü"}
	for round := range 4 {
		stores := map[string]*metastore.Store{
			"v1": newStore(t, dynamostore.LayoutV1),
			"v2": newStore(t, dynamostore.LayoutV2),
		}
		bd, err := boltstore.Open(t.TempDir()+"/lake.db", &boltstore.Options{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		stores["bolt"] = metastore.New(bd)
		defer stores["bolt"].Close()
		keys := map[string]bool{}
		for range 40 + rng.IntN(60) {
			k := segs[rng.IntN(len(segs))]
			for range rng.IntN(3) {
				k += "/" + segs[rng.IntN(len(segs))] + fmt.Sprint(rng.IntN(5))
			}
			keys[k] = true
		}
		for k := range keys {
			for _, s := range stores {
				if err := s.Put(t.Context(), k, []byte("v:"+k)); err != nil {
					t.Fatal(err)
				}
			}
		}
		for range 12 {
			var p string
			if rng.IntN(4) > 0 {
				p = segs[rng.IntN(len(segs))]
				if rng.IntN(2) == 0 {
					p += "/"
				}
			}
			limit := 1 + rng.IntN(9)
			results := map[string][]string{}
			for name, s := range stores {
				results[name] = drainKeys(t, s, p, limit)
			}
			if !slices.Equal(results["v1"], results["bolt"]) || !slices.Equal(results["v2"], results["bolt"]) {
				t.Fatalf("round %d prefix %q limit %d:\nbolt %q\nv1   %q\nv2   %q", round, p, limit, results["bolt"], results["v1"], results["v2"])
			}
		}
	}
}

// drainKeys drains prefix in pages of limit and returns the keys sorted,
// failing on a duplicate, a page over its limit or a wrong value.
func drainKeys(t *testing.T, s *metastore.Store, prefix string, limit int) []string {
	t.Helper()
	var keys []string
	seen := map[string]bool{}
	cur := ""
	for {
		page, err := s.List(t.Context(), prefix, limit, cur)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) > limit {
			t.Fatalf("page of %d over limit %d", len(page.Items), limit)
		}
		for _, it := range page.Items {
			if seen[it.Key] || string(it.Value) != "v:"+it.Key {
				t.Fatalf("key %q twice or with value %q", it.Key, it.Value)
			}
			seen[it.Key] = true
			keys = append(keys, it.Key)
		}
		if cur = page.Cursor; cur == "" {
			break
		}
	}
	slices.Sort(keys)
	return keys
}

// countingAPI records what the store asks of DynamoDB, seen from outside
// the store.
type countingAPI struct {
	ddb.API
	mu  sync.Mutex
	qs  []queryCall
	nsc int
}

type queryCall struct {
	bucket         string
	limit, scanned int32
}

func (c *countingAPI) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.API.Query(ctx, in, o...)
	if err == nil {
		var bucket string
		for _, v := range in.ExpressionAttributeValues {
			if s, ok := v.(*types.AttributeValueMemberS); ok && strings.Contains(s.Value, "#") {
				bucket = s.Value
			}
		}
		c.mu.Lock()
		c.qs = append(c.qs, queryCall{bucket: bucket, limit: aws.ToInt32(in.Limit), scanned: out.ScannedCount})
		c.mu.Unlock()
	}
	return out, err
}

func (c *countingAPI) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	c.mu.Lock()
	c.nsc++
	c.mu.Unlock()
	return c.API.Scan(ctx, in, o...)
}

func (c *countingAPI) reset() {
	c.mu.Lock()
	c.qs, c.nsc = nil, 0
	c.mu.Unlock()
}

func (c *countingAPI) queries() []queryCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.qs)
}

func (c *countingAPI) scans() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nsc
}

package reshape

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
)

// demoTable creates the demo table in DynamoDB Local under a fresh name,
// deleted at the end, and returns the client and the example spec pointed
// at it.
func demoTable(t *testing.T, opts DemoOptions) (*dynamodb.Client, *Spec, DemoResult) {
	t.Helper()
	c := ddblocal.Client(t)
	name := ddblocal.TableName(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	opts.TableWaitPeriod = 50 * time.Millisecond
	res, err := Demo(t.Context(), c, name, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := exampleSpec(t)
	s.Table = name
	return c, s, res
}

func newReshaper(t *testing.T, api API, s *Spec) *Reshaper {
	t.Helper()
	r, err := New(t.Context(), api, s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func stateStore(t *testing.T) *metastore.Store {
	t.Helper()
	d, err := boltstore.Open(filepath.Join(t.TempDir(), "state.db"), &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s := metastore.New(d)
	t.Cleanup(func() { s.Close() })
	return s
}

var fastIndex = IndexOptions{PollInterval: 20 * time.Millisecond}

// recorder wraps the API and records every successful UpdateItem by key, and
// can call a hook before each Scan and UpdateItem (to cancel a context).
type recorder struct {
	API
	mu         sync.Mutex
	writes     map[string]int
	failed     int
	beforeScan func()
	beforeUpd  func()
}

func newRecorder(api API) *recorder { return &recorder{API: api, writes: map[string]int{}} }

func (r *recorder) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	r.mu.Lock()
	f := r.beforeScan
	r.mu.Unlock()
	if f != nil {
		f()
	}
	return r.API.Scan(ctx, in, o...)
}

func (r *recorder) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (out *dynamodb.UpdateItemOutput, err error) {
	r.mu.Lock()
	f := r.beforeUpd
	r.mu.Unlock()
	if f != nil {
		f()
	}
	// The request is not interrupted by a cancellation: a killed process
	// may have sent it, and the recorder must know whether it applied.
	out, err = r.API.UpdateItem(context.WithoutCancel(ctx), in, o...)
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() {
		if ctx.Err() != nil && err == nil {
			out, err = nil, ctx.Err() // the response is lost with the process
		}
	}()
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		r.writes[KeyString(in.Key)]++
	case errors.As(err, &ccf):
		r.failed++
	}
	return out, err
}

func (r *recorder) counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.writes))
	for k, v := range r.writes {
		out[k] = v
	}
	return out
}

// scanAll returns every item of the table (strongly consistent).
func scanAll(t *testing.T, api API, table string) []map[string]types.AttributeValue {
	t.Helper()
	var items []map[string]types.AttributeValue
	var start map[string]types.AttributeValue
	for {
		out, err := api.Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true), ExclusiveStartKey: start})
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items
		}
		start = out.LastEvaluatedKey
	}
}

func str(item map[string]types.AttributeValue, name string) string { return scalarText(item[name]) }

func isComment(item map[string]types.AttributeValue) bool { _, ok := item["commentId"]; return ok }

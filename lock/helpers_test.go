package lock

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/metastore/remotestore"
	"github.com/lakemeta/lake/server"
)

// backend opens a fresh store of one kind for a test.
type backend struct {
	name string
	open func(t *testing.T) *metastore.Store
}

// backends are the stores locks are tested on: bolt in process, DynamoDB
// Local (layout v2, and v1), and a node over bolt reached through the
// remote store.
var backends = []backend{
	{"bolt", newBolt},
	{"dynamodb-v2", func(t *testing.T) *metastore.Store { return newDynamo(t, dynamostore.LayoutV2) }},
	{"dynamodb-v1", func(t *testing.T) *metastore.Store { return newDynamo(t, dynamostore.LayoutV1) }},
	{"node", func(t *testing.T) *metastore.Store { return newRemote(t, serveNode(t, newBolt(t))) }},
}

func newBolt(t *testing.T) *metastore.Store {
	t.Helper()
	d, err := boltstore.Open(filepath.Join(t.TempDir(), "lake.db"), &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s := metastore.New(d)
	t.Cleanup(func() { s.Close() })
	return s
}

// newDynamoTables creates fresh tables on DynamoDB Local and returns their
// options; the tables are deleted after the test.
func newDynamoTables(t *testing.T, layout dynamostore.Layout) (ddb.API, dynamostore.Options) {
	t.Helper()
	api := ddb.NewClient(ddblocal.Config(t), "")
	opts := dynamostore.Options{Table: ddblocal.TableName(t), Layout: layout}
	if err := dynamostore.Create(context.Background(), api, opts); err != nil {
		t.Fatalf("create tables: %v", err)
	}
	t.Cleanup(func() {
		for _, name := range []string{opts.Table, opts.Table + dynamostore.V2Suffix} {
			api.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		}
	})
	return api, opts
}

func newDynamo(t *testing.T, layout dynamostore.Layout) *metastore.Store {
	t.Helper()
	api, opts := newDynamoTables(t, layout)
	d, err := dynamostore.Open(context.Background(), api, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := metastore.New(d)
	t.Cleanup(func() { s.Close() })
	return s
}

// serveNode serves s as a node on a loopback port and returns its URL.
func serveNode(t *testing.T, s *metastore.Store) string {
	t.Helper()
	srv, err := server.New(s, &server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	url, hs, err := server.ServeLoopback(srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	return url
}

func newRemote(t *testing.T, url string) *metastore.Store {
	t.Helper()
	d, err := remotestore.New(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := metastore.New(d)
	t.Cleanup(func() { s.Close() })
	return s
}

func newLocker(t testing.TB, st Storage, o Options) *Locker {
	t.Helper()
	l, err := New(st, &o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// crash stops a lease's heartbeat without releasing it, as a killed
// process would leave it.
func (ls *Lease) crash() {
	close(ls.stop)
	<-ls.done
	ls.timer.Stop()
}

// counting counts the calls of each Storage operation and can make writes
// fail on demand, to check the request budget and the retry paths.
type counting struct {
	Storage
	mu    sync.Mutex
	calls map[string]int
	// fail, when set, decides the error of each write before it is sent
	// (nothing applied); after applying it, lose reports the outcome as
	// unknown.
	fail func(op, key string) error
	lose func(op, key string) bool
}

func count(st Storage) *counting { return &counting{Storage: st, calls: map[string]int{}} }

func (c *counting) note(op, key string) (error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[op]++
	var err error
	if c.fail != nil {
		err = c.fail(op, key)
	}
	return err, c.lose != nil && c.lose(op, key)
}

func (c *counting) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.calls {
		n += v
	}
	return n
}

func (c *counting) reset() {
	c.mu.Lock()
	c.calls = map[string]int{}
	c.mu.Unlock()
}

func (c *counting) Get(ctx context.Context, key string) ([]byte, error) {
	if err, _ := c.note("get", key); err != nil {
		return nil, err
	}
	return c.Storage.Get(ctx, key)
}

func (c *counting) Create(ctx context.Context, key string, v []byte) error {
	return c.write("create", key, func() error { return c.Storage.Create(ctx, key, v) })
}

func (c *counting) Swap(ctx context.Context, key string, old, v []byte) error {
	return c.write("swap", key, func() error { return c.Storage.Swap(ctx, key, old, v) })
}

func (c *counting) Fenced(ctx context.Context, f Record, m Mutation) error {
	return c.write("fenced", m.Key, func() error { return c.Storage.Fenced(ctx, f, m) })
}

func (c *counting) WriteFenced(ctx context.Context, f Record, m metastore.Mutation) error {
	return c.write("write", m.Key, func() error { return c.Storage.(ResourceWriter).WriteFenced(ctx, f, m) })
}

func (c *counting) write(op, key string, apply func() error) error {
	err, lose := c.note(op, key)
	if err != nil {
		return err
	}
	if err := apply(); err != nil {
		return err
	}
	if lose {
		return metastore.ErrUnavailable
	}
	return nil
}

package syncload_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/lakemeta/lake/bench/syncload"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/reqcount"
)

// TestStoreRequestsAreTheWire: the store requests the harness charges to
// its workers (the figure `bench sync` prints per sync beside the minimum)
// are the requests a counting proxy in front of DynamoDB Local sees during
// the run, one a request however many keys it addresses (a BatchGetItem
// of many keys, a TransactWriteItems of many items). Counting a request
// once per key it addressed once tripled the configuration 5's figure.
func TestStoreRequestsAreTheWire(t *testing.T) {
	cfg := ddblocal.Config(t)
	p, err := reqcount.Start(ddblocal.Endpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cfg.BaseEndpoint = aws.String(p.URL)
	api := syncload.DynamoKeys(ddb.NewClient(cfg, ""))
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
	d, err := dynamofs.Open(t.Context(), api, dynamofs.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c := syncload.DefaultConfig() // the seed's configuration 5: catalog and lifecycle on
	c.Workers, c.Iterations, c.Duration, c.Files, c.FileSize, c.Interval = 2, 4, 0, 5, 64, time.Second
	p.Take()
	samples, err := syncload.Run(t.Context(), c, syncload.Env{Driver: d}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wire := p.Take()
	var charged, syncs int64
	for _, s := range samples {
		if !s.OK {
			t.Fatalf("worker %d, iteration %d failed: %s", s.Worker, s.Iteration, s.Err)
		}
		charged += s.StoreRequests
		syncs += int64(s.Syncs)
	}
	// Every request of the run is a worker's: the harness opens the
	// store before it, and charges each worker's calls to it.
	t.Logf("%d syncs: %d requests charged to the workers, %d on the wire: %s", syncs, charged, wire.Total(), wire)
	if charged != int64(wire.Total()) {
		t.Fatalf("charged %d store requests to the workers; the wire carried %d", charged, wire.Total())
	}
}

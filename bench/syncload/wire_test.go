package syncload_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/lakemeta/lake/bench/syncload"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/reqcount"
	"github.com/lakemeta/lake/internal/s3local"
)

// TestStoreRequestsAreTheWire: the store requests the harness charges to
// its workers (the figure `bench sync` prints per sync beside the minimum)
// are the requests a counting proxy in front of DynamoDB Local or
// versitygw sees during the run, one a request however many keys it
// addresses (a BatchGetItem of many keys, a TransactWriteItems of many
// items). Counting a request once per key it addressed had tripled the
// configuration 5's figure on DynamoDB; leaving out the requests of the
// lifecycle's drops and reclaims (the meter's DropPartition,
// DropPartitionIfDeleted and Reclaim, which did not charge the worker) had
// halved it, and cut S3's by a third, until this test ran configuration 5
// itself, catalog and lifecycle on.
func TestStoreRequestsAreTheWire(t *testing.T) {
	t.Run("dynamodb", func(t *testing.T) {
		cfg := ddblocal.Config(t)
		p := proxy(t, ddblocal.Endpoint(t))
		cfg.BaseEndpoint = aws.String(p.URL)
		table := ddblocal.TableName(t)
		ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
		d, err := dynamofs.Open(t.Context(), syncload.DynamoKeys(ddb.NewClient(cfg, "")), dynamofs.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		chargedIsWire(t, p, d)
	})
	t.Run("s3", func(t *testing.T) {
		bucket := s3local.Bucket(t)
		p := proxy(t, s3local.Endpoint(t))
		d, err := s3fs.Open(t.Context(), syncload.S3Keys(s3fs.NewClient(s3local.EnvConfig(p.URL)), "wire/"), s3fs.Options{Bucket: bucket, Prefix: "wire"})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		chargedIsWire(t, p, d)
	})
}

func proxy(t *testing.T, target string) *reqcount.Proxy {
	t.Helper()
	p, err := reqcount.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// chargedIsWire runs configuration 5 (catalog incremental, lifecycle on)
// on d, 2 workers × 4 iterations, and compares what the workers were charged with
// what p carried meanwhile.
func chargedIsWire(t *testing.T, p *reqcount.Proxy, d datastore.Driver) {
	t.Helper()
	c := syncload.DefaultConfig()
	c.Workers, c.Iterations, c.Duration, c.Files, c.FileSize, c.Interval = 2, 4, 0, 5, 64, time.Second
	c.Catalog, c.Lifecycle = syncload.CatalogIncremental, syncload.Seed004Lifecycle
	// Each worker enables its namespace's lifecycle before its first
	// iteration, charged to none: what that costs is counted here, on a
	// namespace of its own, as the worker does it.
	p.Take()
	probe, err := datastore.New(d).Namespace("wire-setup")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := probe.SetLifecycle(t.Context(), datastore.Lifecycle{Enabled: true, Horizon: syncload.LifecycleHorizon}); err != nil {
		t.Fatal(err)
	}
	setup := int64(p.Take().Total())
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
	// The lifecycle's drops and reclaims were once left out (issue 31:
	// half of DynamoDB's requests and a third of S3's in this run).
	t.Logf("%d syncs: %d requests charged to the workers, %d on the wire (%d setup a worker): %s", syncs, charged, wire.Total(), setup, wire)
	if want := int64(wire.Total()) - setup*int64(c.Workers); charged != want {
		t.Fatalf("charged %d store requests to the workers; the wire carried %d, %d of them the workers' setup", charged, wire.Total(), setup*int64(c.Workers))
	}
}

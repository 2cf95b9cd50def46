package syncload_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lakemeta/lake/bench"
	"github.com/lakemeta/lake/bench/syncload"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// TestHotPartitionOnDynamoDB runs the seed's full pull (its GSI partition
// FILE, kept live beside the datastore) and the feed pull on DynamoDB
// Local, counting DynamoDB's own requests by partition key: with the full
// pull FILE becomes the hottest key and its share grows with the history,
// while with the feed pull no key carries that much. DynamoDB Local never
// throttles, so the share of the load is what shows the hot partition.
func TestHotPartitionOnDynamoDB(t *testing.T) {
	run := func(pull syncload.Pull) []syncload.Row {
		api := syncload.DynamoKeys(ddb.NewClient(ddblocal.Config(t), ""))
		table := ddblocal.TableName(t)
		ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
		d, err := dynamofs.Open(t.Context(), api, dynamofs.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		env := syncload.Env{Driver: d}
		if pull == syncload.PullFull {
			gsi := table + bench.GSIFeedSuffix
			fi, err := bench.OpenGSIFeed(t.Context(), api, gsi)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ddblocal.Client(t).DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(gsi)})
			})
			env.FullIndex = fi
		}
		cfg := syncload.DefaultConfig()
		cfg.Workers, cfg.Iterations, cfg.Duration, cfg.Files, cfg.FileSize = 2, 25, 0, 3, 16
		cfg.Pull, cfg.Catalog, cfg.Interval = pull, syncload.CatalogNone, 300*time.Millisecond
		samples, err := syncload.Run(t.Context(), cfg, env, nil)
		if err != nil {
			t.Fatal(err)
		}
		failed := 0
		for _, s := range samples {
			if !s.OK {
				// DynamoDB Local, shared by the machine's tests, now and
				// then drops a connection mid-response; the harness
				// records such an iteration as failed, and so may a few
				// here. What is asserted is the load's shape.
				t.Logf("%s: worker %d, iteration %d failed: %s", pull, s.Worker, s.Iteration, s.Err)
				if failed++; failed > len(samples)/10 {
					t.Fatalf("%s: %d of %d iterations failed", pull, failed, len(samples))
				}
				continue
			}
			if s.StoreRequests == 0 {
				t.Fatalf("%s: DynamoDB's requests were not counted: %+v", pull, s)
			}
		}
		// Two rows: the first and the second half of the iterations.
		var half time.Duration
		for _, s := range samples {
			half = max(half, s.End)
		}
		return syncload.Series(cfg, samples, half/2+1)
	}
	full := run(syncload.PullFull)
	if len(full) < 2 {
		t.Fatalf("full: %d rows", len(full))
	}
	first, last := full[0], full[len(full)-1]
	if last.HotKey != "gsi1pk:FILE" || last.HotKeyShare <= first.HotKeyShare || last.StoreItemsReadPerSync <= first.StoreItemsReadPerSync {
		t.Errorf("full pull: hot key %s %.2f then %s %.2f, items read per sync %.1f then %.1f: want FILE, its share and the items read growing",
			first.HotKey, first.HotKeyShare, last.HotKey, last.HotKeyShare, first.StoreItemsReadPerSync, last.StoreItemsReadPerSync)
	}
	for _, r := range run(syncload.PullFeed) {
		if r.HotKeyShare >= last.HotKeyShare {
			t.Errorf("feed pull: key %s carries %.2f of the load, as much as FILE under the full pull (%.2f)", r.HotKey, r.HotKeyShare, last.HotKeyShare)
		}
	}
}

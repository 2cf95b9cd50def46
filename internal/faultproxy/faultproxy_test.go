package faultproxy_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultproxy"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/metastore/storetest"
)

// TestFaultsOnTheWire: with every fault injected into 30% of requests on
// the wire, concurrent CAS increments through the SDK end at exactly the
// number that reported success.
func TestFaultsOnTheWire(t *testing.T) {
	cfg := ddblocal.Config(t)
	p, err := faultproxy.Start(ddblocal.Endpoint(t), 42)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	direct := ddb.NewClient(cfg, "")
	api := ddb.NewClient(cfg, p.URL)
	opts := ddblocal.Tables(t, direct, dynamostore.Options{Layout: dynamostore.LayoutV2,
		Retryer: ddb.NewRetryer(ddb.RetryOptions{MaxAttempts: 12, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond})})
	d, err := dynamostore.Open(t.Context(), api, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := metastore.New(d)
	ctx := t.Context()
	if err := s.Put(ctx, "tbl/c", []byte("0")); err != nil {
		t.Fatal(err)
	}
	rates := map[faultproxy.Fault]float64{}
	for _, f := range faultproxy.All {
		rates[f] = 0.3 / float64(len(faultproxy.All))
	}
	p.SetRates(rates)
	// A CAS is one PutItem on v2 (no idempotency token): one whose response
	// was lost and whose counter another incrementer moved before the retry
	// ends unknown, applied once or not at all.
	wins, unknown, err := storetest.IncrementsUnderFaults(ctx, s, "tbl/c", 4, 30)
	if err != nil {
		t.Fatal(err)
	}
	p.SetRates(nil)
	got, err := s.Get(ctx, "tbl/c")
	n, _ := strconv.ParseInt(string(got), 10, 64)
	if err != nil || n < wins || n > wins+unknown {
		t.Fatalf("counter %q (%v), successful CAS %d, unknown outcomes %d", got, err, wins, unknown)
	}
	injected, requests := p.Injected()
	for _, f := range faultproxy.All {
		if f == faultproxy.TxConflict {
			continue // a TransactionConflict on a PutItem is answered as a 500
		}
		if injected[f] == 0 {
			t.Errorf("no %s injected", f)
		}
	}
	t.Logf("%d requests, faults %v, %d increments, %d unknown outcomes", requests, injected, wins, unknown)
}

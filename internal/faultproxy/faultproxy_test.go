package faultproxy_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lakemeta/lake/backend/dynamostore"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultproxy"
	"github.com/lakemeta/lake/metastore"
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
	direct := dynamostore.NewClient(cfg, "")
	api := dynamostore.NewClient(cfg, p.URL)
	opts := ddblocal.Tables(t, direct, dynamostore.Options{Layout: dynamostore.LayoutV2,
		Retryer: dynamostore.NewRetryer(dynamostore.RetryOptions{MaxAttempts: 12, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond})})
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
	wins, err := storetest.Increments(ctx, s, "tbl/c", 4, 30)
	if err != nil {
		t.Fatal(err)
	}
	p.SetRates(nil)
	got, err := s.Get(ctx, "tbl/c")
	if err != nil || string(got) != fmt.Sprint(wins) {
		t.Fatalf("counter %q (%v), successful CAS %d", got, err, wins)
	}
	injected, requests := p.Injected()
	for _, f := range faultproxy.All {
		if injected[f] == 0 {
			t.Errorf("no %s injected", f)
		}
	}
	t.Logf("%d requests, faults %v, %d increments", requests, injected, wins)
}

package dynamostore_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/faultapi"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/metastore/storetest"
)

// fastRetries keeps fault tests quick; the classification is the real one.
var fastRetries = ddb.NewRetryer(ddb.RetryOptions{MaxAttempts: 10, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond})

func faultyStore(t *testing.T, layout dynamostore.Layout) (*metastore.Store, *faultapi.API) {
	api := faultapi.New(client(t), nil)
	opts := newTables(t, api, layout)
	opts.Retryer = fastRetries
	s := metastore.New(openDriver(t, api, opts))
	return s, api
}

// TestExactlyOnceUnderLostResponses: the first attempt of each of 1,000 CAS
// writes is applied and its response lost; each CAS must report success
// (no false conflict from its own retry) and apply exactly once.
func TestExactlyOnceUnderLostResponses(t *testing.T) {
	for _, layout := range []dynamostore.Layout{dynamostore.LayoutV1, dynamostore.LayoutV2} {
		t.Run(string(layout), func(t *testing.T) {
			s, api := faultyStore(t, layout)
			ctx := t.Context()
			const n = 1000
			if err := s.Put(ctx, "tbl/counter", []byte("0")); err != nil {
				t.Fatal(err)
			}
			api.SetPlan(faultapi.DropFirstResponse())
			for i := range n {
				err := s.CAS(ctx, "tbl/counter", metastore.ExpectValue(fmt.Appendf(nil, "%d", i)), fmt.Appendf(nil, "%d", i+1))
				if err != nil {
					t.Fatalf("CAS %d → %d: %v", i, i+1, err)
				}
			}
			api.SetPlan(nil)
			got, err := s.Get(ctx, "tbl/counter")
			if err != nil || string(got) != fmt.Sprint(n) {
				t.Fatalf("counter = %q, %v; want %d", got, err, n)
			}
			if dropped := api.Injected()[faultapi.DropResponse]; dropped != n {
				t.Fatalf("%d responses dropped, want %d", dropped, n)
			}
		})
	}
}

// TestReadBackWhenTokenForgotten: if DynamoDB no longer knows an earlier
// attempt's token, the retry fails its condition; the store reads the old
// item returned with the cancellation and recognises its own write.
func TestReadBackWhenTokenForgotten(t *testing.T) {
	s, api := faultyStore(t, dynamostore.LayoutV2)
	ctx := t.Context()
	api.ForgetTokens(true)
	api.SetPlan(faultapi.DropFirstResponse())
	if err := s.CAS(ctx, "tbl/a", metastore.ExpectAbsent(), []byte("1")); err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := s.CAS(ctx, "tbl/a", metastore.ExpectValue([]byte("1")), []byte("2")); err != nil {
		t.Fatalf("swap: %v", err)
	}
	if err := s.Put(ctx, "lease/g", []byte("g")); err != nil {
		t.Fatalf("put: %v", err)
	}
	err := s.GuardedMutate(ctx, metastore.Guard{Key: "lease/g", Value: []byte("g")},
		metastore.Mutation{Key: "tbl/a", Expect: metastore.ExpectValue([]byte("2")), Value: []byte("3")})
	if err != nil {
		t.Fatalf("guarded: %v", err)
	}
	// A delete leaves nothing to carry its token: the outcome is reported
	// as unknown (retryable), never as a conflict.
	err = s.Delete(ctx, "tbl/a", []byte("3"))
	if !errors.Is(err, metastore.ErrUnavailable) || errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("delete with forgotten token: %v, want ErrUnavailable", err)
	}
	api.SetPlan(nil)
	if _, err := s.Get(ctx, "tbl/a"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("the delete applied once: Get = %v", err)
	}
	// A genuine conflict is still a conflict.
	if err := s.CAS(ctx, "lease/g", metastore.ExpectValue([]byte("other")), []byte("x")); !errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("genuine conflict: %v", err)
	}
}

// TestTransientFaults: with every kind of fault injected at random into 30%
// of all requests, concurrent CAS increments end at exactly the number that
// reported success plus some of those whose outcome was reported unknown,
// and no error but a genuine conflict or an unknown outcome reaches the
// caller. A CAS is a PutItem (no idempotency token): one whose response was
// lost and whose item another incrementer overwrote before the retry may
// have applied, and says so (ErrUnavailable).
func TestTransientFaults(t *testing.T) {
	for _, layout := range []dynamostore.Layout{dynamostore.LayoutV1, dynamostore.LayoutV2} {
		t.Run(string(layout), func(t *testing.T) {
			s, api := faultyStore(t, layout)
			ctx := t.Context()
			if err := s.Put(ctx, "tbl/c", []byte("0")); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			rng := rand.New(rand.NewPCG(1, 2))
			kinds := []faultapi.Fault{faultapi.DropRequest, faultapi.DropResponse, faultapi.ServerError, faultapi.Throttle, faultapi.TxConflict}
			api.SetPlan(func(op, _ string) faultapi.Fault {
				mu.Lock()
				defer mu.Unlock()
				if rng.Float64() < 0.3 {
					return kinds[rng.IntN(len(kinds))]
				}
				return faultapi.None
			})
			wins, unknown, err := storetest.IncrementsUnderFaults(ctx, s, "tbl/c", 4, 40)
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			api.SetPlan(nil)
			got, err := s.Get(ctx, "tbl/c")
			n, _ := strconv.Atoi(string(got))
			if err != nil || int64(n) < wins || int64(n) > wins+unknown {
				t.Fatalf("counter = %q (%v), successful CAS = %d, unknown outcomes = %d", got, err, wins, unknown)
			}
			// TxConflict turns into a 500 on a PutItem: Put and CAS are one.
			for _, k := range kinds[:4] {
				if api.Injected()[k] == 0 {
					t.Errorf("no %v fault was injected", k)
				}
			}
			t.Logf("injected %v; %d increments, %d unknown outcomes, %d of them applied", api.Injected(), wins, unknown, int64(n)-wins)
		})
	}
}

// TestFaultsOutlastRetries: when faults outlast the retries, the caller gets
// ErrUnavailable, not a conflict or a hang.
func TestFaultsOutlastRetries(t *testing.T) {
	s, api := faultyStore(t, dynamostore.LayoutV2)
	api.SetPlan(func(string, string) faultapi.Fault { return faultapi.Throttle })
	_, err := s.Get(t.Context(), "tbl/x")
	if !errors.Is(err, metastore.ErrUnavailable) {
		t.Fatalf("Get under permanent throttling: %v", err)
	}
	err = s.Put(t.Context(), "tbl/x", []byte("v"))
	if !errors.Is(err, metastore.ErrUnavailable) {
		t.Fatalf("Put under permanent throttling: %v", err)
	}
}

package migrate_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultapi"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/migrate"
)

// TestExactlyOnceInEveryState: in each migration state, the first attempt
// of each of 1,000 CAS writes is applied and its response lost; each
// reports success and applies exactly once. The migration's own
// transactions (dual, the backfill's creates, the barrier, the marker) run
// under the same fault and still converge.
func TestExactlyOnceInEveryState(t *testing.T) {
	const n = 1000
	api := faultapi.New(ddb.NewClient(ddblocal.Config(t), ""), nil)
	table := ddblocal.Tables(t, api, dynamostore.Options{}).Table
	opts := dynamostore.Options{Table: table, Refresh: refresh,
		Retryer: ddb.NewRetryer(ddb.RetryOptions{MaxAttempts: 10, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond})}
	d, err := dynamostore.Open(t.Context(), api, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := metastore.New(d)
	md, _ := dynamostore.Open(t.Context(), api, opts)
	m, err := migrate.New(md, &migrate.Options{Refresh: refresh, PageSize: 50, Settle: new(4 * refresh)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	api.SetPlan(faultapi.DropFirstResponse())
	// Four writers, each with its own counter, n/4 increments each.
	const writers = 4
	increments := func(state string) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Go(func() {
				key := fmt.Sprintf("tbl/counter-%s-%d", state, w)
				if err := s.Put(ctx, key, []byte("0")); err != nil {
					errs <- err
					return
				}
				for i := range n / writers {
					if err := s.CAS(ctx, key, metastore.ExpectValue(fmt.Appendf(nil, "%d", i)), fmt.Appendf(nil, "%d", i+1)); err != nil {
						errs <- fmt.Errorf("CAS %d of %s: %w", i, key, err)
						return
					}
				}
				if v, err := s.Get(ctx, key); err != nil || string(v) != fmt.Sprint(n/writers) {
					errs <- fmt.Errorf("%s = %q, %v", key, v, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("%s: %v", state, err)
		}
	}
	increments("v1")
	for _, step := range []string{"dual", "backfill", "verify", "finalize"} {
		if err := m.Run(ctx, step); err != nil {
			t.Fatalf("%s under lost responses: %v", step, err)
		}
		time.Sleep(2 * refresh)
		st, _ := m.Status(ctx)
		if step != "verify" {
			increments(string(st.State))
		}
	}
	api.SetPlan(nil)
	rep, err := m.Verify(ctx)
	if err != nil || !rep.Clean() {
		t.Fatalf("verify: %v %s", err, rep.Summary())
	}
	t.Logf("%d responses lost; every write applied exactly once", api.Injected()[faultapi.DropResponse])
}

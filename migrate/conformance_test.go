package migrate_test

import (
	"testing"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/metastore/storetest"
	"github.com/lakemeta/lake/migrate"
	"github.com/lakemeta/lake/storeurl"
)

// TestConformanceInEveryState (issue 9): a dynamodb:// store (layout auto)
// passes the whole conformance suite in every state a migration goes
// through, the state driven by the migrator, so the dual and mirror write
// paths are held to the contract like every backend.
func TestConformanceInEveryState(t *testing.T) {
	steps := map[dynamostore.State][]string{
		dynamostore.StateDual:     {"dual"},
		dynamostore.StateBackfill: {"dual", "backfill"},
		dynamostore.StateV2Auth:   {"dual", "backfill", "verify", "finalize"},
		dynamostore.StateV2Only:   {"dual", "backfill", "verify", "finalize", "retire-v1"},
	}
	for _, state := range []dynamostore.State{dynamostore.StateDual, dynamostore.StateBackfill, dynamostore.StateV2Auth, dynamostore.StateV2Only} {
		t.Run(string(state), func(t *testing.T) {
			storetest.RunConformanceTests(t, func(t *testing.T) *metastore.Store {
				e := newEnv(t)
				m := e.migrator(&migrate.Options{Retention: new(0 * refresh)})
				e.run(m, steps[state]...)
				if st, err := m.Status(t.Context()); err != nil || st.State != state {
					t.Fatalf("the migrator reached %s, want %s (%v)", st.State, state, err)
				}
				s, err := storeurl.Open(t.Context(), "dynamodb://"+e.table, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			})
		})
	}
}

package dynamofs_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dstest"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultapi"
)

// newDriver creates a fresh table on DynamoDB Local and opens it.
func newDriver(t *testing.T) *dynamofs.Driver { return newDriverTB(t) }

// newDriverTB is newDriver for tests and benchmarks.
func newDriverTB(t testing.TB) *dynamofs.Driver {
	t.Helper()
	api := ddb.NewClient(ddblocal.Config(t), "")
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
	d, err := dynamofs.Open(t.Context(), api, dynamofs.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// tableOpener creates a fresh table on DynamoDB Local and returns its name
// and what opens a driver on it, each over a client of its own, as another
// process would, committing at most maxCommit entries in one transaction
// (0: the default).
func tableOpener(t *testing.T) (string, func(maxCommit int) *dynamofs.Driver) {
	t.Helper()
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
	return table, func(maxCommit int) *dynamofs.Driver {
		t.Helper()
		d, err := dynamofs.Open(t.Context(), ddb.NewClient(ddblocal.Config(t), ""), dynamofs.Options{Table: table, MaxCommit: maxCommit})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
}

func newStore(t *testing.T) *datastore.Store {
	s := datastore.New(newDriver(t))
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	dstest.RunConformanceTests(t, newStore)
}

func TestKilledWriter(t *testing.T) {
	api := ddb.NewClient(ddblocal.Config(t), "")
	table := os.Getenv("LAKE_DYNAMOFS_TEST_TABLE")
	if table == "" {
		table = ddblocal.TableName(t)
		ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
		t.Setenv("LAKE_DYNAMOFS_TEST_TABLE", table)
	}
	dstest.RunKilledWriter(t, "TestKilledWriter", func(t *testing.T) *datastore.Store {
		d, err := dynamofs.Open(t.Context(), api, dynamofs.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		return datastore.New(d)
	})
}

// TestCommitsApplyOnceWhenResponsesAreLost drops the response of the first
// attempt of every commit transaction (after DynamoDB applied it) and
// throttles reads now and then: every Put reports success, and the feed holds
// each change once, at dense positions.
func TestCommitsApplyOnceWhenResponsesAreLost(t *testing.T) {
	api := ddb.NewClient(ddblocal.Config(t), "")
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
	var mu sync.Mutex
	seen := map[string]bool{}
	calls := 0
	faulty := faultapi.New(api, func(op, token string) faultapi.Fault {
		mu.Lock()
		defer mu.Unlock()
		calls++
		switch {
		case op == "TransactWriteItems" && !seen[token]:
			seen[token] = true
			return faultapi.DropResponse
		case op != "TransactWriteItems" && calls%7 == 0:
			return faultapi.Throttle
		}
		return faultapi.None
	})
	d, err := dynamofs.Open(t.Context(), faulty, dynamofs.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	const n = 40
	for i := range n {
		if _, err := s.Put(t.Context(), fmt.Sprintf("data/f/1/p%02d", i%25), strings.NewReader(fmt.Sprint(i)), nil); err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
	}
	if h, err := s.Head(t.Context(), "f/1"); err != nil || h.Seq != n {
		t.Fatalf("head = %+v, %v; want %d changes, each applied once", h, err, n)
	}
	ch, upTo, err := s.Changes(t.Context(), "f/1", 0, 1000)
	if err != nil || len(ch) != 25 || upTo != n || ch[len(ch)-1].Pos != n {
		t.Fatalf("feed = %d entries up to %d (%v); want 25 paths up to %d", len(ch), upTo, err, n)
	}
	if got := faulty.Injected()[faultapi.DropResponse]; got < n {
		t.Fatalf("only %d responses dropped", got)
	}
}

package nodewatch_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/migrate"
	"github.com/lakemeta/lake/migrate/nodewatch"
	"github.com/lakemeta/lake/server"
)

// TestNodesFollowFinalization: while a finalization holds the barrier,
// every mutation through every node gets 503 with Retry-After and reads
// keep working; after the marker the same nodes accept writes again without
// a restart. The nodes heartbeat into the registry and export the state.
func TestNodesFollowFinalization(t *testing.T) {
	const refresh = 50 * time.Millisecond
	api := ddb.NewClient(ddblocal.Config(t), "")
	table := ddblocal.Tables(t, api, dynamostore.Options{}).Table
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var urls []string
	for _, id := range []string{"node-a", "node-b"} {
		d, err := dynamostore.Open(t.Context(), api, dynamostore.Options{Table: table, Refresh: refresh})
		if err != nil {
			t.Fatal(err)
		}
		w, err := nodewatch.Watch(t.Context(), d, id, "commit", refresh, quiet)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close(context.Background()) })
		adm := server.NewAdmission()
		adm.AddSource(w)
		srv, err := server.New(metastore.New(d), &server.Options{NodeID: id, Admission: adm, Collectors: w.Collectors(), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		t.Cleanup(ts.Close)
		urls = append(urls, ts.URL)
	}
	put := func(url, key, value string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, url+"/v1/kv/"+key, strings.NewReader(value))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	get := func(url, key string) (int, string) {
		resp, err := http.Get(url + "/v1/kv/" + key)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i, u := range urls {
		if r := put(u, "tbl/t"+string(rune('a'+i)), "v1"); r.StatusCode/100 != 2 {
			t.Fatalf("put before migration: %d", r.StatusCode)
		}
	}
	md, _ := dynamostore.Open(t.Context(), api, dynamostore.Options{Table: table, Refresh: refresh})
	crash := true
	m, err := migrate.New(md, &migrate.Options{Refresh: refresh, Crash: func(p string) error {
		if crash && p == "finalize:barrier-installed" {
			return errors.New("stop here")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"dual", "backfill", "verify"} {
		if err := m.Run(t.Context(), step); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	st, _ := m.Status(t.Context())
	if len(st.Peers) != 2 || st.V1Only != 0 {
		t.Fatalf("registry: %d live peers, %d v1-only", len(st.Peers), st.V1Only)
	}
	if err := m.Run(t.Context(), "finalize"); !errors.Is(err, migrate.ErrCrashed) {
		t.Fatalf("finalize: %v", err)
	}
	time.Sleep(3 * refresh)
	for _, u := range urls {
		r := put(u, "tbl/ta", "during")
		if r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: put under the barrier: %d, Retry-After %q", u, r.StatusCode, r.Header.Get("Retry-After"))
		}
		if code, v := get(u, "tbl/ta"); code != 200 || v != "v1" {
			t.Fatalf("%s: read under the barrier: %d %q", u, code, v)
		}
	}
	crash = false
	if err := m.Run(t.Context(), "finalize"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * refresh)
	for _, u := range urls {
		// Each node notices the marker within a few refresh intervals.
		deadline := time.Now().Add(5 * time.Second)
		for r := put(u, "tbl/ta", "after"); r.StatusCode/100 != 2; r = put(u, "tbl/ta", "after") {
			if time.Now().After(deadline) {
				t.Fatalf("%s: put after the marker: %d", u, r.StatusCode)
			}
			time.Sleep(refresh)
		}
		resp, err := http.Get(u + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{`lake_migration_state{state="v2-authoritative"} 1`, "lake_v1_only_peers 0", `lake_backend_requests_total{op="TransactWriteItems"}`} {
			if !strings.Contains(string(b), want) {
				t.Fatalf("%s/metrics lacks %q", u, want)
			}
		}
	}
}

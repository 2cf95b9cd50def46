package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

func seedCatalog(t *testing.T, n *node, count int) {
	t.Helper()
	for i := range count {
		if err := n.store.Put(t.Context(), fmt.Sprintf("tbl/t%03d", i), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Keys outside the prefix are not the catalog's business.
	n.store.Put(t.Context(), "append-operation/t/1", []byte("x"))
}

func catalogOf(t *testing.T, n *node) nodeapi.CatalogResponse {
	t.Helper()
	r := n.call(t, "GET", nodeapi.CatalogPath, nil)
	want(t, "catalog", r, 200, "")
	var c nodeapi.CatalogResponse
	if err := json.Unmarshal(r.body, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCatalogKeepsLastGoodCopy: a failing store does not take the catalog
// away; the node serves its last good copy and says how old it is and why.
func TestCatalogKeepsLastGoodCopy(t *testing.T) {
	n := newNode(t, &Options{CatalogPageSize: 10})
	r := n.call(t, "GET", nodeapi.CatalogPath, nil)
	want(t, "catalog before the first refresh", r, 503, nodeapi.CodeUnavailable)
	if r.header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	seedCatalog(t, n, 25)
	if _, err := n.srv.catalog.refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := catalogOf(t, n)
	if c.Size != 25 || len(c.Items) != 25 || c.Prefix != "tbl/" || c.Items[0].Key != "tbl/t000" || c.Items[24].Key != "tbl/t024" || c.LastError != "" {
		t.Fatalf("catalog: size %d, prefix %q, last error %q", c.Size, c.Prefix, c.LastError)
	}

	n.drv.fail(fmt.Errorf("%w: throttled", metastore.ErrUnavailable))
	n.srv.refreshCatalog(t.Context())
	time.Sleep(5 * time.Millisecond)
	c2 := catalogOf(t, n)
	if c2.Size != 25 || c2.LastError == "" || c2.LastErrorAt == "" || c2.RefreshedAt != c.RefreshedAt || c2.AgeSeconds <= c.AgeSeconds {
		t.Fatalf("after a failed refresh: size %d, last error %q, refreshed %s (was %s), age %v (was %v)",
			c2.Size, c2.LastError, c2.RefreshedAt, c.RefreshedAt, c2.AgeSeconds, c.AgeSeconds)
	}
	m := n.call(t, "GET", nodeapi.MetricsPath, nil)
	for _, s := range []string{"lake_catalog_last_refresh_failed 1", "lake_catalog_items 25", `lake_catalog_refreshes_total{outcome="error"} 1`} {
		if !bytes.Contains(m.body, []byte(s)) {
			t.Errorf("metrics lack %q", s)
		}
	}
	// The catalog is served from memory: reading it costs the store nothing.
	lists := n.drv.lists.Load()
	catalogOf(t, n)
	if n.drv.lists.Load() != lists {
		t.Fatal("GET /v1/catalog read the store")
	}

	// A failure on a later page also keeps the whole last copy, not a part.
	n.drv.fail(nil)
	n.store.Put(t.Context(), "tbl/t999", []byte("new"))
	n.drv.failLists(nil, fmt.Errorf("%w: page 2 failed", metastore.ErrUnavailable))
	if _, err := n.srv.catalog.refresh(t.Context()); err == nil {
		t.Fatal("refresh with a failing page succeeded")
	}
	if c := catalogOf(t, n); c.Size != 25 {
		t.Fatalf("a half-failed refresh changed the copy: size %d", c.Size)
	}
	if _, err := n.srv.catalog.refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c := catalogOf(t, n); c.Size != 26 || c.LastError != "" {
		t.Fatalf("after recovery: size %d, last error %q", c.Size, c.LastError)
	}
}

// passList is a nil error for the faulty driver's list queue: it lets one
// List call through.
var passList error

// TestCatalogRefreshCost: a refresh reads the List pages it drains and
// nothing else; an expired cursor restarts the drain.
func TestCatalogRefreshCost(t *testing.T) {
	n := newNode(t, &Options{CatalogPageSize: 10})
	seedCatalog(t, n, 25)
	gets, lists := n.drv.gets.Load(), n.drv.lists.Load()
	pages, err := n.srv.catalog.refresh(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// 25 items in pages of 10: 10, 10, 5 (bolt knows the last page is last).
	if got := n.drv.lists.Load() - lists; got != 3 || pages != 3 {
		t.Fatalf("refresh made %d List calls (reported %d), want 3", got, pages)
	}
	if got := n.drv.gets.Load() - gets; got != 0 {
		t.Fatalf("refresh made %d point reads", got)
	}

	lists = n.drv.lists.Load()
	n.drv.failLists(passList, fmt.Errorf("%w: layout changed", metastore.ErrCursorExpired))
	if _, err := n.srv.catalog.refresh(t.Context()); err != nil {
		t.Fatalf("refresh across an expired cursor: %v", err)
	}
	// Page 1, the expired page 2, then a whole new drain of 3 pages.
	if got := n.drv.lists.Load() - lists; got != 5 {
		t.Fatalf("restarted refresh made %d List calls, want 5", got)
	}
	if c := catalogOf(t, n); c.Size != 25 {
		t.Fatalf("size %d", c.Size)
	}
	expired := fmt.Errorf("%w: always", metastore.ErrCursorExpired)
	n.drv.failLists(expired, expired, expired, expired, expired)
	if _, err := n.srv.catalog.refresh(t.Context()); err == nil {
		t.Fatal("a refresh whose cursor always expires succeeded")
	}
}

package server

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

// rawReply sends raw bytes on a fresh connection to the node at url, half
// closes it, and reads one response: requests that no Go client would send.
func rawReply(t testing.TB, url, raw string) (reply, error) {
	t.Helper()
	return rawExchange(t, url, raw, true)
}

// rawExchange sends raw on a new connection and reads the answer; with
// halfClose it then closes its side for writing, so that the server meets
// the end of a request cut short. Go's server takes that end for a client
// gone and cancels the context of a request still being served, so a
// complete request whose handler reads the store is sent without it.
func rawExchange(t testing.TB, url, raw string, halfClose bool) (reply, error) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		return reply{}, err
	}
	if halfClose {
		c.(*net.TCPConn).CloseWrite()
	}
	method, _, _ := strings.Cut(raw, " ")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{resp.StatusCode, resp.Header, b}, nil
}

func mustRaw(t *testing.T, url, raw string) reply {
	t.Helper()
	r, err := rawReply(t, url, raw)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return r
}

// TestEmptyConditionsRefused (issue 12, row 2): an empty or whitespace
// If-Match or If-None-Match, or one that is not a list of entity tags, is
// 400, never an unconditional overwrite.
func TestEmptyConditionsRefused(t *testing.T) {
	n := newNode(t, nil)
	n.store.Put(t.Context(), "tbl/c", []byte("keep"))
	for _, h := range []string{
		"If-Match:", "If-Match: ", "If-Match: \t", "If-None-Match:", "If-None-Match:  ",
		"If-Match: ,", "If-Match: abc", "If-Match: *, \"x\"", "If-None-Match: W/",
	} {
		raw := "PUT " + kv("tbl/c") + " HTTP/1.1\r\nHost: x\r\n" + h + "\r\nContent-Length: 1\r\n\r\nx"
		want(t, h, mustRaw(t, n.url, raw), 400, nodeapi.CodeInvalidArgument)
		raw = "DELETE " + kv("tbl/c") + " HTTP/1.1\r\nHost: x\r\n" + h + "\r\n\r\n"
		want(t, "DELETE "+h, mustRaw(t, n.url, raw), 400, nodeapi.CodeInvalidArgument)
	}
	want(t, "GET with an empty If-None-Match", mustRaw(t, n.url, "GET "+kv("tbl/c")+" HTTP/1.1\r\nHost: x\r\nIf-None-Match:\r\n\r\n"), 400, nodeapi.CodeInvalidArgument)
	if v, err := n.store.Get(t.Context(), "tbl/c"); err != nil || string(v) != "keep" {
		t.Fatalf("tbl/c = %q, %v after refused writes; want keep", v, err)
	}
	// A well-formed list still works.
	want(t, "If-Match list", n.call(t, "PUT", kv("tbl/c"), []byte("new"), "If-Match", `"nope", `+nodeapi.ETag([]byte("keep"))), 204, "")
}

// TestStrictQuery (issue 12, row 3): bad escapes, ";" separators, unknown
// and repeated names are 400; none is dropped.
func TestStrictQuery(t *testing.T) {
	n := newNode(t, nil)
	for i := range 3 {
		n.store.Put(t.Context(), fmt.Sprintf("cur/%d", i), []byte("v"))
	}
	r := n.call(t, "GET", nodeapi.ListPath+"?prefix=cur/&limit=1", nil)
	want(t, "first page", r, 200, "")
	var page nodeapi.ListResponse
	json.Unmarshal(r.body, &page)
	for _, q := range []string{
		"prefix=tbl/%zz", "cursor=" + page.Cursor + "%zz", "prefix=cur/&limit=2%zz", "prefix=cur/;limit=1",
		"prefix=cur/&limit=1&prefix=cur/", "prefix=cur/&bogus=1", "limit=1%", "prefix=cur/&Limit=1",
	} {
		want(t, q, n.call(t, "GET", nodeapi.ListPath+"?"+q, nil), 400, nodeapi.CodeInvalidArgument)
	}
	for _, q := range []string{"bogus=1", "after=tbl/a", "limit=0", "limit=1&limit=2", "limit=1;after=x", "limit=%zz"} {
		want(t, "catalog?"+q, n.call(t, "GET", nodeapi.CatalogPath+"?"+q, nil), 400, nodeapi.CodeInvalidArgument)
	}
	want(t, "resume with a parameter", n.call(t, "POST", nodeapi.ResumePath+"?x", nil), 400, nodeapi.CodeInvalidArgument)
}

// TestStrictJSON (issue 12, rows 4 and 5): invalid UTF-8 in a key (raw or
// an unpaired surrogate), duplicate names and names in another case are
// refused, and nothing is written.
func TestStrictJSON(t *testing.T) {
	n := newNode(t, nil)
	ctx := t.Context()
	n.store.Put(ctx, "lease/g", []byte("ok"))
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	good, bad := b64("ok"), b64("wrong")
	target := func(key string) string {
		return `{"key":` + key + `,"expect_absent":true,"value":"` + b64("v") + `"}`
	}
	guard := `{"key":"lease/g","value":"` + good + `"}`
	for _, body := range []string{
		`{"guard":` + guard + `,"target":` + target("\"tbl/q\xff\"") + `}`,
		`{"guard":` + guard + `,"target":` + target(`"tbl/s\udfff"`) + `}`,
		`{"guard":` + guard + `,"target":` + target(`"tbl/s\ud800x"`) + `}`,
		`{"guard":{"key":"lease/g","value":"` + bad + `"},"guard":` + guard + `,"target":` + target(`"tbl/d"`) + `}`,
		`{"guard":` + guard + `,"target":{"key":"tbl/d","expect":"` + b64("v") + `","delete":true,"delete":false,"value":"` + b64("v") + `"}}`,
		`{"Guard":` + guard + `,"target":` + target(`"tbl/d"`) + `}`,
		`{"guard":{"KEY":"lease/g","value":"` + good + `"},"target":` + target(`"tbl/d"`) + `}`,
		`{"guard":` + guard + `,"target":` + target(`"tbl/d"`) + `} {}`,
	} {
		want(t, body, n.call(t, "POST", nodeapi.GuardedPath, []byte(body)), 400, nodeapi.CodeInvalidArgument)
	}
	items, err := n.store.ListAll(ctx, "tbl/")
	if err != nil || len(items) != 0 {
		t.Fatalf("refused guarded mutations wrote %v (%v)", items, err)
	}
	want(t, "valid", n.call(t, "POST", nodeapi.GuardedPath, []byte(`{"guard":`+guard+`,"target":`+target(`"tbl/\u00e9"`)+`}`)), 204, "")
	want(t, "pause with a duplicate name", n.call(t, "POST", nodeapi.PausePath, []byte(`{"reason":"a","reason":"b"}`)), 400, nodeapi.CodeInvalidArgument)
}

// TestCoreErrorsAreJSON (issue 12, row 6): what net/http answers before any
// handler runs is the JSON error of docs/node.md too, and is counted.
func TestCoreErrorsAreJSON(t *testing.T) {
	n := newNode(t, nil)
	for _, tc := range []struct {
		raw    string
		status int
	}{
		{"GET /v1/kv/tbl/%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"GET /v1/kv/tbl/a% HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"PUT /v1/kv/tbl/a HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\nx", 400},
		{"PUT /v1/kv/tbl/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nx", 501},
		{"GET /v1/kv/tbl/a HTTP/1.1\r\n\r\n", 400}, // no Host
		{"GET /v1/kv/tbl/a HTTP/1.1\r\nHost: x\r\nX: " + strings.Repeat("a", 1<<20+4096) + "\r\n\r\n", 431},
	} {
		r := mustRaw(t, n.url, tc.raw)
		want(t, tc.raw[:min(len(tc.raw), 60)], r, tc.status, "")
		r.errBody(t)
	}
	if _, err := n.store.Get(t.Context(), "tbl/a"); err == nil {
		t.Fatal("a refused request wrote tbl/a")
	}
	m := n.call(t, "GET", nodeapi.MetricsPath, nil)
	if !bytes.Contains(m.body, []byte(`lake_http_requests_total{op="unknown",outcome="invalid_argument"} 5`)) {
		t.Fatalf("net/http's own answers are not counted:\n%s", grepLines(m.body, "lake_http_requests_total"))
	}
}

func grepLines(b []byte, s string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestStalledBody (issue 12, row 7): a body that stops arriving is 408
// request_timeout (the client's ErrUnavailable, CLI exit 1), not invalid
// input, and nothing is written.
func TestStalledBody(t *testing.T) {
	n := newNode(t, &Options{BodyTimeout: 200 * time.Millisecond})
	c, err := net.Dial("tcp", strings.TrimPrefix(n.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "PUT "+kv("tbl/slow")+" HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "PUT"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want(t, "stalled body", reply{resp.StatusCode, resp.Header, b}, 408, nodeapi.CodeRequestTimeout)
	if nodeapi.Sentinel(nodeapi.CodeRequestTimeout) != metastore.ErrUnavailable {
		t.Fatal("request_timeout must be ErrUnavailable on the client (exit 1)")
	}
	if _, err := n.store.Get(t.Context(), "tbl/slow"); err == nil {
		t.Fatal("a stalled body was written")
	}
}

// TestListAndCatalogBoundedByBytes (issue 12, row 1): one list request over
// large values answers a page within metastore.MaxPageBytes whatever its
// limit, and the catalog copy refuses to grow past its byte limit.
func TestListAndCatalogBoundedByBytes(t *testing.T) {
	n := newNode(t, &Options{CatalogMaxBytes: 1 << 20})
	big := bytes.Repeat([]byte("v"), 300<<10)
	for i := range 8 {
		if err := n.store.Put(t.Context(), fmt.Sprintf("tbl/big%02d", i), big); err != nil {
			t.Fatal(err)
		}
	}
	r := n.call(t, "GET", nodeapi.ListPath+"?prefix=tbl/&limit=1000", nil)
	want(t, "list", r, 200, "")
	var page nodeapi.ListResponse
	if err := json.Unmarshal(r.body, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 3 || page.Cursor == "" {
		t.Fatalf("a 1 MiB page of 300 KiB values holds %d items (cursor %q), want 3 and a cursor", len(page.Items), page.Cursor)
	}
	if _, err := n.srv.catalog.refresh(t.Context()); err == nil || !strings.Contains(err.Error(), "more than 1048576 bytes") {
		t.Fatalf("catalog refresh over its limit: %v", err)
	}
	m := n.call(t, "GET", nodeapi.MetricsPath, nil)
	if !bytes.Contains(m.body, []byte("lake_catalog_max_bytes 1.048576e+06")) || !bytes.Contains(m.body, []byte("lake_catalog_bytes 0")) {
		t.Fatalf("catalog size metrics:\n%s", grepLines(m.body, "lake_catalog_"))
	}
}

// TestETagSpelledAsDocumented: the header goes out as "ETag", as
// docs/node.md and RFC 9110 spell it, not Go's canonical "Etag" (issue 12).
func TestETagSpelledAsDocumented(t *testing.T) {
	n := newNode(t, nil)
	n.store.Put(t.Context(), "tbl/e", []byte("v"))
	c, err := net.Dial("tcp", strings.TrimPrefix(n.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET "+kv("tbl/e")+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	raw, _ := io.ReadAll(c)
	if !bytes.Contains(raw, []byte("\r\nETag: "+nodeapi.ETag([]byte("v"))+"\r\n")) {
		t.Fatalf("no ETag header spelled ETag in:\n%s", raw)
	}
}

// TestCatalogPaged: ?limit=N pages through the copy in key order, "next"
// naming where to continue, so a client never has to take the whole copy
// at once.
func TestCatalogPaged(t *testing.T) {
	n := newNode(t, nil)
	seedCatalog(t, n, 25)
	if _, err := n.srv.catalog.refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	var keys []string
	after, pages := "", 0
	for {
		path := nodeapi.CatalogPath + "?limit=10"
		if after != "" {
			path += "&after=" + after
		}
		r := n.call(t, "GET", path, nil)
		want(t, path, r, 200, "")
		var c nodeapi.CatalogResponse
		if err := json.Unmarshal(r.body, &c); err != nil {
			t.Fatal(err)
		}
		pages++
		if len(c.Items) > 10 || c.Size != 25 {
			t.Fatalf("page %d: %d items, size %d", pages, len(c.Items), c.Size)
		}
		for _, it := range c.Items {
			keys = append(keys, it.Key)
		}
		if c.Next == "" {
			break
		}
		after = c.Next
	}
	if pages != 3 || len(keys) != 25 || keys[0] != "tbl/t000" || keys[24] != "tbl/t024" {
		t.Fatalf("%d pages, keys %q", pages, keys)
	}
}

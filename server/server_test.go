package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/lakemeta/lake/nodeapi"
)

// node is a server over a faulty bolt store, behind a real HTTP listener
// (so requests go through net/http's parsing, as in production).
type node struct {
	srv   *Server
	drv   *faulty
	store *metastore.Store
	url   string
	token string
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newNode(t testing.TB, opts *Options) *node {
	t.Helper()
	bd, err := boltstore.Open(filepath.Join(t.TempDir(), "lake.db"), &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	f := &faulty{Driver: bd}
	store := metastore.New(f)
	if opts == nil {
		opts = &Options{}
	}
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	srv, err := New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	// ServeLoopback serves the handler behind the node's own listener
	// (net/http's own error answers rewritten to JSON), without Run.
	url, hs, err := ServeLoopback(srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close(); store.Close() })
	return &node{srv: srv, drv: f, store: store, url: url, token: opts.Token}
}

// noRedirects is a client that reports redirects instead of following
// them: a redirect of a key path would silently address another key.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

type reply struct {
	status int
	header http.Header
	body   []byte
}

// errBody decodes the reply as a nodeapi.Error, failing the test if it is
// not one.
func (r reply) errBody(t testing.TB) nodeapi.Error {
	t.Helper()
	var e nodeapi.Error
	if err := json.Unmarshal(r.body, &e); err != nil || e.Code == "" {
		t.Fatalf("status %d: body is not a lake error: %q", r.status, r.body)
	}
	if !strings.HasPrefix(e.Message, "lake: ") {
		t.Fatalf("error message %q does not start with \"lake: \"", e.Message)
	}
	if ct := r.header.Get("Content-Type"); ct != nodeapi.JSONMIMEType {
		t.Fatalf("error Content-Type %q", ct)
	}
	return e
}

// call sends one request; hdr is header name, value pairs. A body of nil
// sends none.
func (n *node) call(t *testing.T, method, path string, body []byte, hdr ...string) reply {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, n.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if n.token != "" {
		req.Header.Set("Authorization", "Bearer "+n.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, b}
}

// want fails t unless r has status and, for an error status, code.
func want(t *testing.T, what string, r reply, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d; body %q", what, r.status, status, r.body)
	}
	if code != "" {
		if e := r.errBody(t); e.Code != code {
			t.Fatalf("%s: code %q, want %q (%s)", what, e.Code, code, e.Message)
		}
	}
}

func kv(key string) string { return nodeapi.KVPrefix + nodeapi.EscapeKey(key) }

func TestGetPutHeaders(t *testing.T) {
	n := newNode(t, nil)
	want(t, "get missing", n.call(t, "GET", kv("tbl/a"), nil), 404, nodeapi.CodeNotFound)

	r := n.call(t, "PUT", kv("tbl/a"), []byte("v1"))
	want(t, "put", r, 204, "")
	if r.header.Get("ETag") != nodeapi.ETag([]byte("v1")) {
		t.Fatalf("put ETag %q", r.header.Get("ETag"))
	}
	r = n.call(t, "GET", kv("tbl/a"), nil)
	want(t, "get", r, 200, "")
	if string(r.body) != "v1" || r.header.Get("Content-Type") != "application/octet-stream" || r.header.Get("ETag") != nodeapi.ETag([]byte("v1")) {
		t.Fatalf("get: body %q, headers %v", r.body, r.header)
	}
	want(t, "head", n.call(t, "HEAD", kv("tbl/a"), nil), 200, "")
	want(t, "get if-none-match", n.call(t, "GET", kv("tbl/a"), nil, "If-None-Match", nodeapi.ETag([]byte("v1"))), 304, "")
	want(t, "get if-none-match other", n.call(t, "GET", kv("tbl/a"), nil, "If-None-Match", nodeapi.ETag([]byte("v0"))), 200, "")

	// An empty value is a value.
	want(t, "put empty", n.call(t, "PUT", kv("tbl/empty"), []byte{}), 204, "")
	r = n.call(t, "GET", kv("tbl/empty"), nil)
	if r.status != 200 || len(r.body) != 0 || r.header.Get("ETag") != nodeapi.ETag(nil) {
		t.Fatalf("get empty: %d %q %v", r.status, r.body, r.header)
	}
}

func TestETagFormat(t *testing.T) {
	// SHA-256("") in unpadded base64url; a fixed vector guards the format.
	if got := nodeapi.ETag(nil); got != `"47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"` {
		t.Fatalf("ETag(empty) = %s", got)
	}
}

func TestConditionalPut(t *testing.T) {
	n := newNode(t, nil)
	k := kv("tbl/c")
	want(t, "create", n.call(t, "PUT", k, []byte("a"), "If-None-Match", "*"), 204, "")
	r := n.call(t, "PUT", k, []byte("b"), "If-None-Match", "*")
	want(t, "create over existing", r, 412, nodeapi.CodeConflict)
	if e := r.errBody(t); e.Key != "tbl/c" || e.Reason == "" {
		t.Fatalf("conflict body does not name key and reason: %+v", e)
	}
	want(t, "if-none-match etag on put", n.call(t, "PUT", k, []byte("b"), "If-None-Match", `"x"`), 400, nodeapi.CodeInvalidArgument)
	want(t, "both conditions", n.call(t, "PUT", k, []byte("b"), "If-Match", "*", "If-None-Match", "*"), 400, nodeapi.CodeInvalidArgument)

	want(t, "cas stale", n.call(t, "PUT", k, []byte("b"), "If-Match", nodeapi.ETag([]byte("zzz"))), 412, nodeapi.CodeConflict)
	want(t, "cas weak tag", n.call(t, "PUT", k, []byte("b"), "If-Match", "W/"+nodeapi.ETag([]byte("a"))), 412, nodeapi.CodeConflict)
	want(t, "cas", n.call(t, "PUT", k, []byte("b"), "If-Match", nodeapi.ETag([]byte("a"))), 204, "")
	want(t, "cas list", n.call(t, "PUT", k, []byte("c"), "If-Match", `"nope", `+nodeapi.ETag([]byte("b"))), 204, "")
	want(t, "cas star", n.call(t, "PUT", k, []byte("d"), "If-Match", "*"), 204, "")
	want(t, "cas missing key", n.call(t, "PUT", kv("tbl/none"), []byte("b"), "If-Match", nodeapi.ETag([]byte("a"))), 412, nodeapi.CodeConflict)
	want(t, "cas star missing key", n.call(t, "PUT", kv("tbl/none"), []byte("b"), "If-Match", "*"), 412, nodeapi.CodeConflict)
	if v, _ := n.store.Get(t.Context(), "tbl/c"); string(v) != "d" {
		t.Fatalf("value %q, want d", v)
	}
	want(t, "tbl/none stays absent", n.call(t, "GET", kv("tbl/none"), nil), 404, nodeapi.CodeNotFound)
}

// TestCASReadThenChange: the node compares If-Match with what it read and
// then CASes with exactly those bytes, so a value changed between its read
// and its write is a conflict, not a lost update.
func TestCASReadThenChange(t *testing.T) {
	n := newNode(t, nil)
	ctx := t.Context()
	n.store.Put(ctx, "tbl/r", []byte("old"))
	// Read as the handler does, then change the value behind it.
	cur, err := n.srv.current(ctx, "tbl/r", condition{present: true, tags: []string{nodeapi.ETag([]byte("old"))}})
	if err != nil {
		t.Fatal(err)
	}
	n.store.Put(ctx, "tbl/r", []byte("changed"))
	if err := n.store.CAS(ctx, "tbl/r", metastore.ExpectValue(cur), []byte("new")); !errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("CAS with the stale read: %v, want conflict", err)
	}
}

func TestDelete(t *testing.T) {
	n := newNode(t, nil)
	n.store.Put(t.Context(), "tbl/d", []byte("v"))
	want(t, "no if-match", n.call(t, "DELETE", kv("tbl/d"), nil), 428, nodeapi.CodeInvalidArgument)
	want(t, "if-none-match", n.call(t, "DELETE", kv("tbl/d"), nil, "If-None-Match", "*"), 400, nodeapi.CodeInvalidArgument)
	want(t, "stale", n.call(t, "DELETE", kv("tbl/d"), nil, "If-Match", nodeapi.ETag([]byte("w"))), 412, nodeapi.CodeConflict)
	want(t, "delete", n.call(t, "DELETE", kv("tbl/d"), nil, "If-Match", nodeapi.ETag([]byte("v"))), 204, "")
	want(t, "gone", n.call(t, "GET", kv("tbl/d"), nil), 404, nodeapi.CodeNotFound)
	want(t, "delete missing", n.call(t, "DELETE", kv("tbl/d"), nil, "If-Match", "*"), 412, nodeapi.CodeConflict)
}

func TestKeyValidationAndEscaping(t *testing.T) {
	n := newNode(t, nil)
	long := "tbl/" + strings.Repeat("k", metastore.MaxKeyBytes)
	cases := []struct {
		name, path, code string
	}{
		{"empty key", nodeapi.KVPrefix, nodeapi.CodeInvalidKey},
		{"NUL", nodeapi.KVPrefix + "a%00b", nodeapi.CodeInvalidKey},
		{"not UTF-8", nodeapi.KVPrefix + "a%FFb", nodeapi.CodeInvalidKey},
		{"too long", kv(long), nodeapi.CodeInvalidKey},
		{"reserved", kv(metastore.ControlPrefix + "x"), nodeapi.CodeReservedKey},
		{"unescaped ?", nodeapi.KVPrefix + "what?x=1", nodeapi.CodeInvalidKey},
		{"trailing ?", nodeapi.KVPrefix + "what?", nodeapi.CodeInvalidKey},
	}
	for _, c := range cases {
		want(t, c.name+" GET", n.call(t, "GET", c.path, nil), 400, c.code)
		want(t, c.name+" PUT", n.call(t, "PUT", c.path, []byte("v")), 400, c.code)
	}

	// Keys that a careless router would rewrite or split all round-trip.
	keys := []string{"tbl/a b", "tbl/what?x=1", "tbl/100%", "tbl/%2F", "tbl/ü/表/🦆", "a//b", "/lead", "trail/",
		".", "..", "a/./b", "a/../b", "tbl/#frag", "tbl/+plus", "tbl/;semi", "tab\tkey", "new\nline", "tbl/..", "%"}
	for _, k := range keys {
		want(t, "put "+k, n.call(t, "PUT", kv(k), []byte("v:"+k)), 204, "")
		r := n.call(t, "GET", kv(k), nil)
		if r.status != 200 || string(r.body) != "v:"+k {
			t.Fatalf("key %q: GET %d %q", k, r.status, r.body)
		}
	}
	items, err := n.store.ListAll(t.Context(), "")
	if err != nil || len(items) != len(keys) {
		t.Fatalf("stored %d keys (%v), want %d", len(items), err, len(keys))
	}
	for _, it := range items {
		if string(it.Value) != "v:"+it.Key {
			t.Fatalf("key %q holds %q: a request addressed another key", it.Key, it.Value)
		}
	}
	// curl writes slashes as is: /v1/kv/tbl/x and /v1/kv/tbl%2Fx are one key,
	// and "//" is not collapsed (no redirect to another key).
	want(t, "literal slash", n.call(t, "PUT", "/v1/kv/tbl/lit", []byte("L")), 204, "")
	if r := n.call(t, "GET", "/v1/kv/tbl%2Flit", nil); string(r.body) != "L" {
		t.Fatalf("escaped slash: %d %q", r.status, r.body)
	}
	if r := n.call(t, "GET", "/v1/kv/a//b", nil); r.status != 200 || string(r.body) != "v:a//b" {
		t.Fatalf("literal a//b: %d %q", r.status, r.body)
	}
}

func TestBodyLimits(t *testing.T) {
	n := newNode(t, nil)
	max := bytes.Repeat([]byte{7}, metastore.MaxValueBytes)
	want(t, "max value", n.call(t, "PUT", kv("tbl/max"), max), 204, "")
	want(t, "one over", n.call(t, "PUT", kv("tbl/over"), append(max, 0)), 413, nodeapi.CodeTooLarge)
	want(t, "one over, if-none-match", n.call(t, "PUT", kv("tbl/over"), append(max, 0), "If-None-Match", "*"), 413, nodeapi.CodeTooLarge)

	// Without a declared length (chunked), the limit holds while reading.
	req, _ := http.NewRequestWithContext(t.Context(), "PUT", n.url+kv("tbl/over"), io.MultiReader(bytes.NewReader(max), strings.NewReader("xx")))
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("chunked oversized body: %d", resp.StatusCode)
	}
	want(t, "nothing written", n.call(t, "GET", kv("tbl/over"), nil), 404, nodeapi.CodeNotFound)

	// The largest well-formed guarded mutation fits: three maximal values
	// and two maximal keys whose every byte JSON escapes as \u00XX.
	if GuardedBodyLimit != 3*base64.StdEncoding.EncodedLen(metastore.MaxValueBytes)+2*6*metastore.MaxKeyBytes+4096 {
		t.Fatalf("GuardedBodyLimit %d", GuardedBodyLimit)
	}
	maxB64 := base64.StdEncoding.EncodeToString(max)
	esc := func(c string) string { return strings.Repeat(c, metastore.MaxKeyBytes) }
	maximal := guardedBody(t, map[string]any{
		"guard":  map[string]any{"key": esc("\x01"), "value": maxB64},
		"target": map[string]any{"key": esc("\x02"), "expect": maxB64, "value": maxB64},
	})
	want(t, "maximal guarded body", n.call(t, "POST", nodeapi.GuardedPath, maximal), 409, nodeapi.CodeConflict)
	big := bytes.Repeat([]byte{'a'}, int(GuardedBodyLimit)+1)
	want(t, "guarded body over", n.call(t, "POST", nodeapi.GuardedPath, big), 413, nodeapi.CodeTooLarge)
	want(t, "pause body over", n.call(t, "POST", nodeapi.PausePath, big), 413, nodeapi.CodeTooLarge)
}

func guardedBody(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGuardedMutate(t *testing.T) {
	n := newNode(t, nil)
	ctx := t.Context()
	n.store.Put(ctx, "lease/g", []byte("epoch-1"))
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	ok := map[string]any{
		"guard":  map[string]any{"key": "lease/g", "value": b64("epoch-1")},
		"target": map[string]any{"key": "tbl/t", "expect_absent": true, "value": b64("m1")},
	}
	want(t, "create under guard", n.call(t, "POST", nodeapi.GuardedPath, guardedBody(t, ok)), 204, "")
	if v, _ := n.store.Get(ctx, "tbl/t"); string(v) != "m1" {
		t.Fatalf("target = %q", v)
	}
	r := n.call(t, "POST", nodeapi.GuardedPath, guardedBody(t, ok))
	want(t, "create again", r, 409, nodeapi.CodeConflict)
	if r.errBody(t).Key != "tbl/t" {
		t.Fatalf("conflict names %q", r.errBody(t).Key)
	}
	stale := map[string]any{
		"guard":  map[string]any{"key": "lease/g", "value": b64("epoch-0")},
		"target": map[string]any{"key": "tbl/t", "expect": b64("m1"), "value": b64("m2")},
	}
	want(t, "stale guard", n.call(t, "POST", nodeapi.GuardedPath, guardedBody(t, stale)), 409, nodeapi.CodeConflict)
	del := map[string]any{
		"guard":  map[string]any{"key": "lease/g", "value": b64("epoch-1")},
		"target": map[string]any{"key": "tbl/t", "expect": b64("m1"), "delete": true},
	}
	want(t, "delete under guard", n.call(t, "POST", nodeapi.GuardedPath, guardedBody(t, del)), 204, "")
	want(t, "deleted", n.call(t, "GET", kv("tbl/t"), nil), 404, nodeapi.CodeNotFound)

	bad := []struct {
		name string
		body string
		code string
	}{
		{"not JSON", `{"guard":`, nodeapi.CodeInvalidArgument},
		{"trailing data", `{"guard":{"key":"lease/g","value":""},"target":{"key":"tbl/x","expect_absent":true,"value":""}} {}`, nodeapi.CodeInvalidArgument},
		{"unknown field", `{"guard":{"key":"lease/g","value":""},"target":{"key":"tbl/x","expect_absent":true,"value":"","expected":""}}`, nodeapi.CodeInvalidArgument},
		{"no guard value", `{"guard":{"key":"lease/g"},"target":{"key":"tbl/x","expect_absent":true,"value":""}}`, nodeapi.CodeInvalidArgument},
		{"bad base64", `{"guard":{"key":"lease/g","value":"!!"},"target":{"key":"tbl/x","expect_absent":true,"value":""}}`, nodeapi.CodeInvalidArgument},
		{"no expectation", `{"guard":{"key":"lease/g","value":""},"target":{"key":"tbl/x","value":""}}`, nodeapi.CodeInvalidArgument},
		{"two expectations", `{"guard":{"key":"lease/g","value":""},"target":{"key":"tbl/x","expect_absent":true,"expect":"","value":""}}`, nodeapi.CodeInvalidArgument},
		{"no value", `{"guard":{"key":"lease/g","value":""},"target":{"key":"tbl/x","expect_absent":true}}`, nodeapi.CodeInvalidArgument},
		{"delete with value", `{"guard":{"key":"lease/g","value":""},"target":{"key":"tbl/x","expect":"","delete":true,"value":""}}`, nodeapi.CodeInvalidArgument},
		{"delete expecting absent", `{"guard":{"key":"lease/g","value":""},"target":{"key":"tbl/x","expect_absent":true,"delete":true}}`, nodeapi.CodeInvalidArgument},
		{"guard is target", `{"guard":{"key":"tbl/x","value":""},"target":{"key":"tbl/x","expect_absent":true,"value":""}}`, nodeapi.CodeInvalidArgument},
		{"bad target key", `{"guard":{"key":"lease/g","value":""},"target":{"key":"","expect_absent":true,"value":""}}`, nodeapi.CodeInvalidKey},
		{"reserved guard", `{"guard":{"key":"__lake__/x","value":""},"target":{"key":"tbl/x","expect_absent":true,"value":""}}`, nodeapi.CodeReservedKey},
	}
	for _, c := range bad {
		want(t, c.name, n.call(t, "POST", nodeapi.GuardedPath, []byte(c.body)), 400, c.code)
	}
	r = n.call(t, "GET", nodeapi.GuardedPath, nil)
	want(t, "GET guarded", r, 405, nodeapi.CodeInvalidArgument)
	if r.header.Get("Allow") != "POST" {
		t.Fatalf("Allow %q", r.header.Get("Allow"))
	}
}

func TestList(t *testing.T) {
	n := newNode(t, nil)
	for i := range 5 {
		n.store.Put(t.Context(), fmt.Sprintf("tbl/%d", i), []byte{byte(i)})
	}
	n.store.Put(t.Context(), "other", []byte("o"))
	var got []string
	cursor := ""
	for range 10 {
		r := n.call(t, "GET", nodeapi.ListPath+"?prefix=tbl/&limit=2&cursor="+cursor, nil)
		want(t, "list", r, 200, "")
		var page nodeapi.ListResponse
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Items) > 2 {
			t.Fatalf("page of %d", len(page.Items))
		}
		for _, it := range page.Items {
			got = append(got, fmt.Sprintf("%s=%v", it.Key, it.Value))
		}
		if cursor = page.Cursor; cursor == "" {
			break
		}
	}
	if strings.Join(got, ",") != "tbl/0=[0],tbl/1=[1],tbl/2=[2],tbl/3=[3],tbl/4=[4]" {
		t.Fatalf("listed %v", got)
	}
	r := n.call(t, "GET", nodeapi.ListPath+"?prefix=nothing/", nil)
	want(t, "empty list", r, 200, "")
	if !bytes.Contains(r.body, []byte(`"items":[]`)) {
		t.Fatalf("an empty page must have items [], got %s", r.body)
	}
	for name, c := range map[string]struct{ q, code string }{
		"limit not a number": {"?limit=ten", nodeapi.CodeInvalidArgument},
		"empty limit":        {"?limit=", nodeapi.CodeInvalidArgument},
		"limit zero":         {"?limit=0", nodeapi.CodeInvalidArgument},
		"limit too big":      {"?limit=10001", nodeapi.CodeInvalidArgument},
		"unknown parameter":  {"?prefx=tbl/", nodeapi.CodeInvalidArgument},
		"repeated parameter": {"?prefix=a&prefix=b", nodeapi.CodeInvalidArgument},
		"bad cursor":         {"?prefix=tbl/&limit=2&cursor=garbage", nodeapi.CodeInvalidCursor},
		"reserved prefix":    {"?prefix=__lake__/", nodeapi.CodeReservedKey},
		"NUL prefix":         {"?prefix=a%00", nodeapi.CodeInvalidKey},
	} {
		want(t, name, n.call(t, "GET", nodeapi.ListPath+c.q, nil), 400, c.code)
	}
}

// TestStoreErrorStatuses: each class of store error has its status and
// code; the retryable ones say when to retry.
func TestStoreErrorStatuses(t *testing.T) {
	n := newNode(t, nil)
	cases := []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("%w: throttled", metastore.ErrUnavailable), 503, nodeapi.CodeUnavailable},
		{fmt.Errorf("%w: barrier installed", metastore.ErrWritesPaused), 503, nodeapi.CodeWritesPaused},
		{fmt.Errorf("%w: out of order", metastore.ErrRefused), 409, nodeapi.CodeRefused},
		// Its own code, not unavailable, though it matches ErrUnavailable:
		// the client must learn which command repairs it.
		{fmt.Errorf("%w: v2 copy differs", metastore.ErrDiverged), 409, nodeapi.CodeDiverged},
		{fmt.Errorf("%w: layout changed", metastore.ErrCursorExpired), 400, nodeapi.CodeCursorExpired},
		{context.DeadlineExceeded, 503, nodeapi.CodeUnavailable},
		{errBoom, 500, nodeapi.CodeInternal},
	}
	for _, c := range cases {
		n.drv.fail(c.err)
		for _, r := range []reply{n.call(t, "GET", kv("tbl/x"), nil), n.call(t, "GET", nodeapi.ListPath, nil)} {
			want(t, c.err.Error(), r, c.status, c.code)
			if c.status == 503 && r.header.Get("Retry-After") != "1" {
				t.Fatalf("%v: Retry-After %q", c.err, r.header.Get("Retry-After"))
			}
		}
	}
	n.drv.fail(nil)
	n.store.Close()
	want(t, "closed store", n.call(t, "GET", kv("tbl/x"), nil), 503, nodeapi.CodeUnavailable)
}

func TestRoutes(t *testing.T) {
	n := newNode(t, nil)
	want(t, "unknown", n.call(t, "GET", "/v2/kv/x", nil), 404, nodeapi.CodeInvalidArgument)
	want(t, "unknown v1", n.call(t, "GET", "/v1/nothing", nil), 404, nodeapi.CodeInvalidArgument)
	r := n.call(t, "POST", kv("tbl/x"), nil)
	want(t, "POST kv", r, 405, nodeapi.CodeInvalidArgument)
	if r.header.Get("Allow") != "GET, HEAD, PUT, DELETE" {
		t.Fatalf("Allow %q", r.header.Get("Allow"))
	}
	want(t, "PUT list", n.call(t, "PUT", nodeapi.ListPath, nil), 405, nodeapi.CodeInvalidArgument)
	want(t, "GET pause", n.call(t, "GET", nodeapi.PausePath, nil), 405, nodeapi.CodeInvalidArgument)
	if r := n.call(t, "GET", nodeapi.HealthPath, nil); r.status != 200 || string(r.body) != "ok\n" {
		t.Fatalf("healthz: %d %q", r.status, r.body)
	}
}

func TestAuth(t *testing.T) {
	n := newNode(t, &Options{Token: "s3cret-token"})
	anon := &node{url: n.url}
	wrong := &node{url: n.url, token: "s3cret-tokeN"}
	for _, c := range []*node{anon, wrong} {
		for _, ep := range []struct{ method, path string }{
			{"GET", kv("tbl/a")}, {"PUT", kv("tbl/a")}, {"DELETE", kv("tbl/a")}, {"GET", nodeapi.ListPath},
			{"POST", nodeapi.GuardedPath}, {"GET", nodeapi.CatalogPath}, {"POST", nodeapi.PausePath},
			{"POST", nodeapi.ResumePath}, {"GET", "/v1/nothing"},
		} {
			r := c.call(t, ep.method, ep.path, []byte("v"))
			want(t, ep.method+" "+ep.path+" without the token", r, 401, nodeapi.CodeUnauthorized)
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("401 without WWW-Authenticate: %v", r.header)
			}
		}
	}
	want(t, "not paused by the refused pause", n.call(t, "PUT", kv("tbl/a"), []byte("v")), 204, "")
	want(t, "with the token", n.call(t, "GET", kv("tbl/a"), nil), 200, "")
	// The scheme is case-insensitive (RFC 9110, 11.1).
	want(t, "lower-case scheme", anon.call(t, "GET", kv("tbl/a"), nil, "Authorization", "bearer s3cret-token"), 200, "")
	for _, p := range []string{nodeapi.HealthPath, nodeapi.ReadyPath, nodeapi.MetricsPath} {
		if r := anon.call(t, "GET", p, nil); r.status == 401 {
			t.Fatalf("%s needs a token; probes and scrapers have none", p)
		}
	}
}

func TestOptionsAndListenChecks(t *testing.T) {
	bd, err := boltstore.Open(filepath.Join(t.TempDir(), "lake.db"), &boltstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	store := metastore.New(bd)
	defer store.Close()
	for name, o := range map[string]*Options{
		"token with space":   {Token: "a b"},
		"token with newline": {Token: "abc\n"},
		"reserved prefix":    {CatalogPrefix: metastore.ControlPrefix},
		"negative interval":  {CatalogInterval: -time.Second},
		"page size too big":  {CatalogPageSize: metastore.MaxListLimit + 1},
	} {
		if _, err := New(store, o); !errors.Is(err, metastore.ErrInvalidArgument) && !errors.Is(err, metastore.ErrReservedKey) {
			t.Errorf("%s: New = %v", name, err)
		}
	}
	if _, err := New(nil, nil); !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Errorf("nil store: %v", err)
	}
	for _, c := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:7070", "", true},
		{"127.0.0.2:7070", "", true},
		{"[::1]:7070", "", true},
		{"localhost:7070", "", true},
		{"0.0.0.0:7070", "", false},
		{":7070", "", false},
		{"[::]:7070", "", false},
		{"10.1.2.3:7070", "", false},
		{"example.com:7070", "", false},
		{"0.0.0.0:7070", "t", true},
		{"no-port", "t", false},
	} {
		err := CheckListen(c.addr, c.token)
		if (err == nil) != c.ok {
			t.Errorf("CheckListen(%q, %q) = %v", c.addr, c.token, err)
		}
		if err != nil && !errors.Is(err, metastore.ErrInvalidArgument) {
			t.Errorf("CheckListen(%q): %v is not ErrInvalidArgument", c.addr, err)
		}
	}
}

func TestPauseResume(t *testing.T) {
	n := newNode(t, nil)
	n.store.Put(t.Context(), "tbl/a", []byte("v"))
	r := n.call(t, "POST", nodeapi.PausePath, []byte(`{"reason":"finalizing migration"}`))
	want(t, "pause", r, 200, "")
	var st nodeapi.AdmissionResponse
	json.Unmarshal(r.body, &st)
	if !st.Paused || st.Reason != "finalizing migration" || !st.Drained {
		t.Fatalf("pause answered %s", r.body)
	}
	b64 := base64.StdEncoding.EncodeToString([]byte("x"))
	guarded := fmt.Sprintf(`{"guard":{"key":"tbl/a","value":%q},"target":{"key":"tbl/b","expect_absent":true,"value":%q}}`, b64, b64)
	for _, w := range []struct {
		method, path string
		body         []byte
		hdr          []string
	}{
		{"PUT", kv("tbl/b"), []byte("x"), nil},
		{"PUT", kv("tbl/b"), []byte("x"), []string{"If-None-Match", "*"}},
		{"PUT", kv("tbl/a"), []byte("x"), []string{"If-Match", nodeapi.ETag([]byte("v"))}},
		{"DELETE", kv("tbl/a"), nil, []string{"If-Match", "*"}},
		{"POST", nodeapi.GuardedPath, []byte(guarded), nil},
	} {
		r := n.call(t, w.method, w.path, w.body, w.hdr...)
		want(t, "paused "+w.method, r, 503, nodeapi.CodeWritesPaused)
		if r.header.Get("Retry-After") == "" || !strings.Contains(r.errBody(t).Message, "finalizing migration") {
			t.Fatalf("paused answer lacks Retry-After or reason: %v %s", r.header, r.body)
		}
	}
	want(t, "reads work while paused", n.call(t, "GET", kv("tbl/a"), nil), 200, "")
	want(t, "lists work while paused", n.call(t, "GET", nodeapi.ListPath, nil), 200, "")
	if r := n.call(t, "GET", nodeapi.MetricsPath, nil); !bytes.Contains(r.body, []byte("lake_admission_paused 1")) {
		t.Fatalf("metrics while paused lack lake_admission_paused 1")
	}
	want(t, "resume", n.call(t, "POST", nodeapi.ResumePath, nil), 200, "")
	want(t, "write after resume", n.call(t, "PUT", kv("tbl/b"), []byte("x")), 204, "")
	want(t, "pause with a bad body", n.call(t, "POST", nodeapi.PausePath, []byte(`{"why":1}`)), 400, nodeapi.CodeInvalidArgument)
	if p, _ := n.srv.Admission().State(); p {
		t.Fatal("a refused pause request paused the node")
	}
	want(t, "pause without a body", n.call(t, "POST", nodeapi.PausePath, nil), 200, "")
	if p, reason := n.srv.Admission().State(); !p || reason == "" {
		t.Fatalf("state after pause: %v %q", p, reason)
	}
}

// TestPauseWaitsForInFlight: POST /v1/admin/pause answers only after the
// mutations admitted before it have finished, so a migration that pauses
// knows no write is still landing.
func TestPauseWaitsForInFlight(t *testing.T) {
	n := newNode(t, nil)
	gate, entered := make(chan struct{}), make(chan struct{}, 1)
	n.drv.mu.Lock()
	n.drv.putGate, n.drv.putEntered = gate, entered
	n.drv.mu.Unlock()
	var wg sync.WaitGroup
	var putStatus int
	wg.Go(func() { putStatus = n.call(t, "PUT", kv("tbl/slow"), []byte("v")).status })
	<-entered
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(150 * time.Millisecond)
		released <- time.Now()
		close(gate)
	}()
	r := n.call(t, "POST", nodeapi.PausePath, nil)
	answered := time.Now()
	want(t, "pause", r, 200, "")
	if !bytes.Contains(r.body, []byte(`"drained":true`)) {
		t.Fatalf("pause answered %s", r.body)
	}
	if rel := <-released; answered.Before(rel) {
		t.Fatal("pause answered before the in-flight write finished")
	}
	wg.Wait()
	if putStatus != 204 {
		t.Fatalf("the write admitted before the pause: %d", putStatus)
	}
}

func TestAdmissionSources(t *testing.T) {
	a := NewAdmission()
	var paused bool
	var mu sync.Mutex
	a.AddSource(PauseFunc(func() (bool, string) { mu.Lock(); defer mu.Unlock(); return paused, "migration finalizing" }))
	release, err := a.Admit()
	if err != nil {
		t.Fatal(err)
	}
	if a.InFlight() != 1 {
		t.Fatalf("in flight %d", a.InFlight())
	}
	release()
	release() // extra calls are ignored
	if a.InFlight() != 0 {
		t.Fatalf("in flight %d after release", a.InFlight())
	}
	mu.Lock()
	paused = true
	mu.Unlock()
	if _, err := a.Admit(); !errors.Is(err, metastore.ErrWritesPaused) || !strings.Contains(err.Error(), "migration finalizing") {
		t.Fatalf("Admit with a paused source: %v", err)
	}
	a.Resume() // an operator resume does not lift the source
	if err := a.Check(); !errors.Is(err, metastore.ErrWritesPaused) {
		t.Fatalf("Check after operator resume: %v", err)
	}
	mu.Lock()
	paused = false
	mu.Unlock()
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	rel, _ := a.Admit()
	if err := a.WaitIdle(ctx); err == nil {
		t.Fatal("WaitIdle returned with a mutation in flight")
	}
	rel()
	if err := a.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestReadyAndMetrics(t *testing.T) {
	n := newNode(t, &Options{NodeID: "node-test"})
	want(t, "not ready", n.call(t, "GET", nodeapi.ReadyPath, nil), 503, nodeapi.CodeUnavailable)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- n.srv.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for n.call(t, "GET", nodeapi.ReadyPath, nil).status != 200 {
		if time.Now().After(deadline) {
			t.Fatal("never ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := n.srv.Run(ctx); err == nil {
		t.Fatal("a second Run was accepted")
	}
	// Ready comes with the store's first answer, before the first catalog
	// refresh ends: wait for that refresh before stopping Run, whose
	// cancel would otherwise end it unrecorded.
	for !bytes.Contains(n.call(t, "GET", nodeapi.MetricsPath, nil).body, []byte(`lake_catalog_refreshes_total{outcome="ok"}`)) {
		if time.Now().After(deadline) {
			t.Fatal("no catalog refresh ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	n.call(t, "GET", kv("tbl/missing"), nil)
	n.call(t, "PUT", kv("tbl/a"), []byte("v"))
	r := n.call(t, "GET", nodeapi.MetricsPath, nil)
	for _, m := range []string{
		`lake_http_requests_total{op="get",outcome="not_found"} 1`,
		`lake_http_requests_total{op="put",outcome="ok"} 1`,
		`lake_http_requests_total{op="readyz",outcome="unavailable"}`,
		`lake_http_request_duration_seconds_bucket{op="put",outcome="ok",le=`,
		`lake_catalog_age_seconds`,
		`lake_catalog_items`,
		`lake_catalog_refreshes_total{outcome="ok"}`,
		`lake_admission_paused 0`,
		`lake_ready 1`,
		`lake_node_info{backend="bolt",node_id="node-test"} 1`,
		`go_goroutines`,
	} {
		if !bytes.Contains(r.body, []byte(m)) {
			t.Errorf("metrics lack %s", m)
		}
	}
	for _, line := range strings.Split(string(r.body), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "lake_") &&
			!strings.HasPrefix(line, "go_") && !strings.HasPrefix(line, "process_") && !strings.HasPrefix(line, "promhttp_") {
			t.Errorf("metric outside lake_: %s", line)
		}
	}
}

// TestRequestLog: one debug line per request, with the op and outcome.
func TestRequestLog(t *testing.T) {
	var buf syncBuffer
	n := newNode(t, &Options{Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	n.call(t, "GET", kv("tbl/x"), nil)
	n.drv.fail(errBoom)
	n.call(t, "GET", kv("tbl/x"), nil)
	out := buf.String()
	if !strings.Contains(out, `"msg":"request"`) || !strings.Contains(out, `"outcome":"not_found"`) {
		t.Fatalf("no request line: %s", out)
	}
	if !strings.Contains(out, `"level":"ERROR"`) || !strings.Contains(out, "disk on fire") {
		t.Fatalf("an internal error is not logged as an error: %s", out)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

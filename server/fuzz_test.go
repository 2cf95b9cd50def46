package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

// FuzzHTTPAPI drives a node on a bolt store with arbitrary methods,
// request targets, headers and bodies, sent raw on a real connection (so
// net/http's own parsing is part of what is fuzzed), and asserts for every
// request: no 5xx but the documented ones, a JSON lake error on every
// error, and no key changed unless the request was a write the node
// acknowledged (204), changing at most one key. The seed corpus holds the
// cases of issue 12's table.
func FuzzHTTPAPI(f *testing.F) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	guard := `{"key":"lease/g","value":"` + b64("ok") + `"}`
	target := func(key string) string {
		return `{"key":` + key + `,"expect_absent":true,"value":"` + b64("v") + `"}`
	}
	seeds := []struct {
		method, target, headers string
		body                    string
	}{
		// Valid requests, so that mutation paths are reached.
		{"GET", "/v1/kv/tbl/a", "", ""},
		{"HEAD", "/v1/kv/tbl/a", "", ""},
		{"PUT", "/v1/kv/tbl/b", "", "x"},
		{"PUT", "/v1/kv/tbl/c", "If-None-Match: *\r\n", "new"},
		{"PUT", "/v1/kv/tbl/a", "If-Match: " + nodeapi.ETag([]byte("v1")) + "\r\n", "v2"},
		{"DELETE", "/v1/kv/tbl/a", "If-Match: *\r\n", ""},
		{"POST", "/v1/guarded-mutate", "Content-Type: application/json\r\n", `{"guard":` + guard + `,"target":` + target(`"tbl/g"`) + `}`},
		{"POST", "/v1/admin/pause", "", `{"reason":"fuzz"}`},
		{"POST", "/v1/admin/resume", "", ""},
		{"GET", "/v1/catalog", "", ""},
		{"GET", "/v1/catalog?limit=1&after=tbl/a", "", ""},
		{"GET", "/healthz", "", ""},
		{"GET", "/readyz", "", ""},
		// Row 1: a page as large as the limit allows.
		{"GET", "/v1/list?prefix=tbl/&limit=1000", "", ""},
		{"GET", "/v1/list?limit=10000", "", ""},
		// Row 2: empty or whitespace conditions.
		{"PUT", "/v1/kv/tbl/a", "If-Match:\r\n", "x"},
		{"PUT", "/v1/kv/tbl/a", "If-None-Match:\r\n", "x"},
		{"PUT", "/v1/kv/tbl/a", "If-Match:   \r\n", "x"},
		{"DELETE", "/v1/kv/tbl/a", "If-Match: \t\r\n", ""},
		// Row 3: strict query strings.
		{"GET", "/v1/list?prefix=tbl/%zz", "", ""},
		{"GET", "/v1/list?prefix=tbl/&cursor=AAAA%zz", "", ""},
		{"GET", "/v1/list?limit=2%zz", "", ""},
		{"GET", "/v1/list?prefix=cur/;limit=1", "", ""},
		// Rows 4 and 5: invalid UTF-8, duplicate and differently cased names.
		{"POST", "/v1/guarded-mutate", "", `{"guard":` + guard + `,"target":` + target("\"tbl/q\xff\"") + `}`},
		{"POST", "/v1/guarded-mutate", "", `{"guard":` + guard + `,"target":` + target(`"tbl/s\udfff"`) + `}`},
		{"POST", "/v1/guarded-mutate", "", `{"guard":{"key":"lease/g","value":"` + b64("no") + `"},"guard":` + guard + `,"target":` + target(`"tbl/d"`) + `}`},
		{"POST", "/v1/guarded-mutate", "", `{"guard":` + guard + `,"target":{"key":"tbl/a","expect":"` + b64("v1") + `","delete":true,"delete":false}}`},
		{"POST", "/v1/guarded-mutate", "", `{"Guard":` + guard + `,"target":` + target(`"tbl/d"`) + `}`},
		{"POST", "/v1/guarded-mutate", "", `{"guard":{"KEY":"lease/g","value":"` + b64("ok") + `"},"target":` + target(`"tbl/d"`) + `}`},
		// Row 6: what net/http answers before any handler runs.
		{"GET", "/v1/kv/tbl/%zz", "", ""},
		{"GET", "/v1/kv/tbl/a%", "", ""},
		{"PUT", "/v1/kv/tbl/a", "Content-Length: 1x\r\n", "x"},
		{"PUT", "/v1/kv/tbl/a", "Transfer-Encoding: gzip\r\n", "x"},
		// Row 7: a body that stops before its declared length.
		{"PUT", "/v1/kv/tbl/slow", "Content-Length: 10\r\n", "abc"},
		// Odd shapes (the seeds of the handler-only fuzz target this one
		// replaces).
		{"PUT", "/v1/kv/tbl%2Fa", "If-Match: *\r\n", "v"},
		{"PUT", "/v1/kv/%00", "If-Match: \"x\"\r\nIf-None-Match: \"x\"\r\n", "v"},
		{"DELETE", "/v1/kv/a//b", "If-Match: W/\"x\", *\r\n", ""},
		{"POST", "/v1/guarded-mutate", "", `{"guard":{"key":"a","value":null},"target":{}}`},
		{"GET", "/v1/list?prefix=%FF&limit=-1&cursor=AAAA", "", ""},
		{"GET", "/metrics", "", ""},
		{"BREW", "/v1/kv/tbl/a", "", ""},
		{"GET", "/v1/kv/a//b/../c", "", ""},
		{"GET", "*", "", ""},
		{"PUT", "/v1/kv/__lake__/x", "", "x"},
		// The datastore's namespaces (issue 19): good, internal, refused.
		{"POST", "/v1/data/partitions?namespace=alpha", "", `{}`},
		{"POST", "/v1/data/partitions?namespace=_catalog", "", `{}`},
		{"POST", "/v1/data/partitions?namespace=_other", "", `{}`},
		{"POST", "/v1/data/stat?namespace=", "", `{"paths":["data/a"]}`},
		{"POST", "/v1/data/head?namespace=a&namespace=b", "", `{"partition":"m/1"}`},
		{"POST", "/v1/data/drop?namespace=alpha", "", `{"partition":"m/1"}`},
		{"POST", "/v1/data/drop", "", `{"fence":{"Key":"rec/a/b","Token":"dDE="},"partition":"m/1","now":"2026-11-30T00:00:00Z"}`},
		{"POST", "/v1/data/record?namespace=alpha", "", `{"op":"get","key":"rec/a/b"}`},
		{"GET", "/v1/data/chunk?version=ab&i=0&namespace=alpha", "", ""},
		{"PUT", "/v1/data/chunk?version=ab&i=0&namespace=a%2Fb", "", "x"},
	}
	for _, s := range seeds {
		f.Add(s.method, s.target, s.headers, []byte(s.body))
	}
	data, err := boltfs.Open(filepath.Join(f.TempDir(), "data.db"), &boltfs.Options{Create: true})
	if err != nil {
		f.Fatal(err)
	}
	ds := datastore.New(data)
	f.Cleanup(func() { ds.Close() })
	n := newNode(f, &Options{BodyTimeout: 500 * time.Millisecond, Data: ds})
	ctx := f.Context()
	n.store.Put(ctx, "tbl/a", []byte("v1"))
	n.store.Put(ctx, "lease/g", []byte("ok"))

	f.Fuzz(func(t *testing.T, method, target, headers string, body []byte) {
		n.srv.Admission().Resume()
		before := keyspace(t, n.store)
		raw := rawRequest(method, target, headers, body)
		r, err := rawReply(t, n.url, raw)
		after := keyspace(t, n.store)
		changed := diff(before, after)
		if err != nil {
			// No answer at all (net/http hangs up on some garbage): then
			// nothing may have changed either.
			if len(changed) > 0 {
				t.Fatalf("no response (%v), yet keys changed: %q\nrequest %q", err, changed, raw)
			}
			return
		}
		if r.status >= 500 {
			var e nodeapi.Error
			json.Unmarshal(r.body, &e)
			// A HEAD answer has no body to carry the code: the node sets
			// Retry-After exactly on its writes_paused and unavailable
			// answers, which a loaded machine can give a read.
			headRetry := method == http.MethodHead && r.header.Get("Retry-After") != ""
			documented := r.status == http.StatusNotImplemented || r.status == http.StatusHTTPVersionNotSupported ||
				r.status == http.StatusServiceUnavailable && (e.Code == nodeapi.CodeWritesPaused || e.Code == nodeapi.CodeUnavailable || headRetry)
			if !documented {
				t.Fatalf("undocumented %d (%s)\nrequest %q", r.status, r.body, raw)
			}
		}
		if r.status >= 400 && method != http.MethodHead {
			var e nodeapi.Error
			if err := json.Unmarshal(r.body, &e); err != nil || e.Code == "" || !strings.HasPrefix(e.Message, "lake: ") {
				t.Fatalf("error %d without a JSON lake error body: %q\nrequest %q", r.status, r.body, raw)
			}
		}
		if len(changed) > 0 {
			write := method == http.MethodPut || method == http.MethodDelete || method == http.MethodPost
			if r.status != http.StatusNoContent || !write || len(changed) > 1 {
				t.Fatalf("keys %q changed by a request answered %d (%s)\nrequest %q", changed, r.status, r.body, raw)
			}
		}
	})
}

// rawRequest assembles one HTTP/1.1 request. It adds Content-Length unless
// the fuzzed headers frame the body themselves, and Connection: close, so
// that bytes after the body are never read as a second request.
func rawRequest(method, target, headers string, body []byte) string {
	var b strings.Builder
	b.WriteString(method + " " + target + " HTTP/1.1\r\nHost: node\r\nConnection: close\r\n")
	b.WriteString(headers)
	if headers != "" && !strings.HasSuffix(headers, "\r\n") {
		b.WriteString("\r\n")
	}
	lower := strings.ToLower(headers)
	if !strings.Contains(lower, "content-length") && !strings.Contains(lower, "transfer-encoding") {
		b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.String()
}

// keyspace returns every user key and its value.
func keyspace(t *testing.T, s *metastore.Store) map[string][]byte {
	items, err := s.ListAll(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string][]byte, len(items))
	for _, it := range items {
		m[it.Key] = it.Value
	}
	return m
}

// diff returns the keys whose presence or value differs.
func diff(a, b map[string][]byte) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

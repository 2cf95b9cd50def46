package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakemeta/lake/metastore"
	"github.com/prometheus/client_golang/prometheus"
)

func TestNodeID(t *testing.T) {
	file := NodeIDFile(filepath.Join(t.TempDir(), "lake.db"))
	id, err := LoadOrCreateNodeID(file)
	if err != nil || !strings.HasPrefix(id, "node-") || ValidateNodeID(id) != nil {
		t.Fatalf("created %q, %v", id, err)
	}
	again, err := LoadOrCreateNodeID(file)
	if err != nil || again != id {
		t.Fatalf("reloaded %q, %v; want %q", again, err, id)
	}
	os.WriteFile(file, []byte("bad id\n"), 0o600)
	if _, err := LoadOrCreateNodeID(file); !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Fatalf("a corrupt id file: %v", err)
	}
	if _, err := LoadOrCreateNodeID(filepath.Join(t.TempDir(), "no", "dir", "lake.db.node-id")); err == nil {
		t.Fatal("an id file in a missing directory was accepted")
	}

	a, b := DeriveNodeID("host_1.example", "127.0.0.1:7070"), DeriveNodeID("host_1.example", "127.0.0.1:7071")
	if a == b || a != DeriveNodeID("host_1.example", "127.0.0.1:7070") || ValidateNodeID(a) != nil || !strings.HasPrefix(a, "host-1.example-") {
		t.Fatalf("derived ids %q, %q", a, b)
	}
	if id := DeriveNodeID("", ":7070"); ValidateNodeID(id) != nil {
		t.Fatalf("derived id without host name: %q", id)
	}
	for _, bad := range []string{"", "a b", "ü", strings.Repeat("a", 129), "a/b"} {
		if ValidateNodeID(bad) == nil {
			t.Errorf("ValidateNodeID(%q) accepted", bad)
		}
	}
}

func TestRegistryShared(t *testing.T) {
	n := newNode(t, nil)
	reg := prometheus.NewRegistry()
	if _, err := New(n.store, &Options{Registry: reg, Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(n.store, &Options{Registry: reg, Logger: quietLogger()}); err == nil {
		t.Fatal("two servers registered their metrics in one registry")
	}
}

// FuzzHandler: no request, however malformed, makes the handler panic or
// answer an error that is not a lake JSON error.
func FuzzHandler(f *testing.F) {
	for _, s := range []struct{ method, path, hdr, body string }{
		{"GET", "/v1/kv/tbl/a", "", ""},
		{"PUT", "/v1/kv/tbl%2Fa", "*", "v"},
		{"PUT", "/v1/kv/%00", `"x"`, "v"},
		{"DELETE", "/v1/kv/a//b", `W/"x", *`, ""},
		{"POST", "/v1/guarded-mutate", "", `{"guard":{"key":"a","value":""},"target":{"key":"b","expect_absent":true,"value":""}}`},
		{"POST", "/v1/guarded-mutate", "", `{"guard":{"key":"a","value":null},"target":{}}`},
		{"GET", "/v1/list?prefix=%FF&limit=-1&cursor=AAAA", "", ""},
		{"POST", "/v1/admin/pause", "", `{"reason":"x"}`},
		{"GET", "/v1/catalog", "", ""},
		{"GET", "/metrics", "", ""},
	} {
		f.Add(s.method, s.path, s.hdr, []byte(s.body))
	}
	// One node for every input: a fresh bolt file per input would make
	// fuzzing crawl.
	n := newNode(f, nil)
	f.Fuzz(func(t *testing.T, method, path, cond string, body []byte) {
		u, err := url.ParseRequestURI(path)
		if err != nil || !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "/metrics") {
			return
		}
		req := &http.Request{Method: method, URL: u, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body)),
			ContentLength: int64(len(body)), RequestURI: path}
		req = req.WithContext(t.Context())
		if cond != "" {
			req.Header.Set("If-Match", cond)
			if len(cond)%2 == 0 {
				req.Header.Set("If-None-Match", cond)
			}
		}
		rec := httptest.NewRecorder()
		n.srv.ServeHTTP(rec, req)
		if rec.Code >= 400 {
			reply{rec.Code, rec.Header(), rec.Body.Bytes()}.errBody(t)
		}
		// The pause endpoint must not leave later inputs paused.
		n.srv.Admission().Resume()
	})
}

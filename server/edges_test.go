package server

import (
	"github.com/lakemeta/lake/datastore"
	"strconv"
	"strings"
	"testing"

	"github.com/lakemeta/lake/nodeapi"
)

// TestConditionsStrictEverywhere (issue 26, row 5): an empty or malformed
// If-Match or If-None-Match is 400 on every method and path, and a
// well-formed one on an endpoint that takes none is 400 too, never ignored.
func TestConditionsStrictEverywhere(t *testing.T) {
	n, _ := newDataNode(t)
	n.store.Put(t.Context(), "tbl/a", []byte("v"))
	targets := []struct{ method, path, body string }{
		{"GET", kv("tbl/a"), ""},
		{"HEAD", kv("tbl/a"), ""},
		{"PUT", kv("tbl/a"), "x"},
		{"DELETE", kv("tbl/a"), ""},
		{"GET", nodeapi.ListPath + "?prefix=tbl/", ""},
		{"GET", nodeapi.CatalogPath, ""},
		{"POST", nodeapi.GuardedPath, "{}"},
		{"POST", nodeapi.PausePath, ""},
		{"POST", dataPath(nodeapi.DataCommit, ""), `{"entries":[]}`},
		{"POST", dataPath(nodeapi.DataStat, ""), `{"paths":["a"]}`},
		{"PUT", dataPath(nodeapi.DataChunk, "version=ab&i=0"), "x"},
		{"GET", dataPath(nodeapi.DataInfo, ""), ""},
		{"GET", nodeapi.HealthPath, ""},
		{"GET", nodeapi.MetricsPath, ""},
	}
	for _, tg := range targets {
		for _, h := range []string{"If-Match:", "If-Match: junk", "If-None-Match:", "If-None-Match: junk", "If-None-Match: W/"} {
			raw := tg.method + " " + tg.path + " HTTP/1.1\r\nHost: x\r\n" + h + "\r\n"
			if tg.body != "" {
				raw += "Content-Length: " + strconv.Itoa(len(tg.body)) + "\r\n\r\n" + tg.body
			} else {
				raw += "\r\n"
			}
			r := mustRaw(t, n.url, raw)
			if r.status != 400 {
				t.Errorf("%s %s with %q: status %d, want 400; body %q", tg.method, tg.path, h, r.status, r.body)
			} else if tg.method != "HEAD" {
				if e := r.errBody(t); e.Code != nodeapi.CodeInvalidArgument {
					t.Errorf("%s %s with %q: code %s", tg.method, tg.path, h, e.Code)
				}
			}
		}
	}
	// Well-formed conditions where the endpoint takes none.
	for _, c := range []struct{ method, path, hdr string }{
		{"GET", kv("tbl/a"), `If-Match: "x"`},
		{"DELETE", kv("tbl/a"), `If-None-Match: *`},
		{"GET", nodeapi.ListPath, `If-Match: *`},
		{"POST", dataPath(nodeapi.DataCommit, ""), `If-None-Match: "x"`},
	} {
		raw := c.method + " " + c.path + " HTTP/1.1\r\nHost: x\r\n" + c.hdr + "\r\nContent-Length: 0\r\n\r\n"
		want(t, c.method+" "+c.path+" "+c.hdr, mustRaw(t, n.url, raw), 400, nodeapi.CodeInvalidArgument)
	}
	if v, err := n.store.Get(t.Context(), "tbl/a"); err != nil || string(v) != "v" {
		t.Fatalf("tbl/a = %q, %v after refused requests", v, err)
	}
	// What the endpoints take still works.
	want(t, "GET If-None-Match", n.call(t, "GET", kv("tbl/a"), nil, "If-None-Match", nodeapi.ETag([]byte("v"))), 304, "")
}

// TestDoubleAuthorizationRefused (issue 26, row 6): two Authorization
// headers are 400 whatever their order and values; the first never wins.
func TestDoubleAuthorizationRefused(t *testing.T) {
	n := newNode(t, &Options{Token: "s3cr3t"})
	n.store.Put(t.Context(), "tbl/a", []byte("v"))
	for _, pair := range [][2]string{{"Bearer s3cr3t", "Bearer wrong"}, {"Bearer wrong", "Bearer s3cr3t"}, {"Bearer s3cr3t", "Bearer s3cr3t"}} {
		raw := "GET " + kv("tbl/a") + " HTTP/1.1\r\nHost: x\r\nAuthorization: " + pair[0] + "\r\nAuthorization: " + pair[1] + "\r\n\r\n"
		r := mustRaw(t, n.url, raw)
		want(t, pair[0]+" then "+pair[1], r, 400, nodeapi.CodeInvalidArgument)
		if string(r.body) != "" && strings.Contains(string(r.body), "s3cr3t") {
			t.Fatalf("the answer repeats the token: %q", r.body)
		}
	}
	raw := "GET " + kv("tbl/a") + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cr3t\r\n\r\n"
	// Sent whole, not half-closed: Go's server would cancel the read of the
	// store it serves it with (rawExchange).
	r, err := rawExchange(t, n.url, raw, false)
	if err != nil {
		t.Fatal(err)
	}
	want(t, "one right header", r, 200, "")
}

// TestBadInputTableLimits checks the limits rows of docs/node.md's bad-input
// table: headers over 64 KiB are 431, a chunk over 256 KiB is 413.
func TestBadInputTableLimits(t *testing.T) {
	n, _ := newDataNode(t)
	raw := "GET /v1/kv/tbl/a HTTP/1.1\r\nHost: x\r\nX: " + strings.Repeat("a", 70<<10) + "\r\n\r\n"
	want(t, "70 KiB of headers", mustRaw(t, n.url, raw), 431, nodeapi.CodeTooLarge)
	big := make([]byte, datastore.ChunkSize+1)
	want(t, "a chunk over 256 KiB", n.call(t, "PUT", dataPath(nodeapi.DataChunk, "version=ab&i=0"), big), 413, nodeapi.CodeTooLarge)
}

package remotefs_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/lakemeta/lake/datastore/dstest"
)

// TestPausedHolderAtEveryRequest (issue 28, item 1, through a node): the
// paused takeover of dstest, A's requests to the node held by a proxy in
// front of it.
func TestPausedHolderAtEveryRequest(t *testing.T) {
	base := node(t)
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var p dstest.Pauser
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.Before(r.Method + " " + r.URL.Path)
		// Forwarded from memory: a streamed body could lose its final read
		// to the node's answer (the HTTP/1 server closes an inbound body
		// once a response begins) and the answer would be cut.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	dstest.RunPausedTakeover(t, open(t, proxy.URL), open(t, base), &p)
}

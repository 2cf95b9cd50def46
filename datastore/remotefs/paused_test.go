package remotefs_test

import (
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
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	dstest.RunPausedTakeover(t, open(t, proxy.URL), open(t, base), &p)
}

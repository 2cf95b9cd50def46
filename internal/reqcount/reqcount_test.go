package reqcount

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestCountsByOperation: requests are forwarded with their Host kept and
// counted by DynamoDB operation or S3 kind; Take starts again from zero.
func TestCountsByOperation(t *testing.T) {
	var mu sync.Mutex
	var hosts []string
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.Host)
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	defer target.Close()
	p, err := Start(target.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	do := func(method, path, op string) {
		req, _ := http.NewRequest(method, p.URL+path, strings.NewReader("{}"))
		if op != "" {
			req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != "ok" && method != http.MethodHead {
			t.Fatalf("%s %s: body %q, not forwarded", method, path, b)
		}
		resp.Body.Close()
	}
	do("POST", "/", "GetItem")
	do("POST", "/", "GetItem")
	do("POST", "/", "Query")
	do("GET", "/bucket/key/a", "")
	do("PUT", "/bucket/key/a", "")
	do("HEAD", "/bucket/key/a", "")
	do("GET", "/bucket?list-type=2&prefix=x", "")
	do("POST", "/bucket?delete", "")
	got := p.Take()
	want := map[string]int{"GetItem": 2, "Query": 1, "GET": 1, "PUT": 1, "HEAD": 1, "LIST": 1, "DELETE-MANY": 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s counted %d, want %d (all: %s)", k, got[k], v, got)
		}
	}
	if got.Total() != 8 {
		t.Errorf("total %d, want 8: %s", got.Total(), got)
	}
	if n := p.Take().Total(); n != 0 {
		t.Errorf("after Take: %d", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hosts) != 8 {
		t.Fatalf("the target saw %d requests, want 8", len(hosts))
	}
	for _, h := range hosts {
		if h != strings.TrimPrefix(p.URL, "http://") {
			t.Fatalf("the target saw Host %q, want the proxy's (what the client signed)", h)
		}
	}
}

package reqcount

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBodyForwardedWhole: the proxy reads a request's whole body before it
// forwards the request, so the target's answer can never begin while the
// forward still reads the client's body. (The HTTP/1 server closes an
// inbound body once a response begins; a forward still reading it then
// fails, and the transport drops the target's connection in the middle of
// the answer: a Query's "unexpected EOF" in CI, through a streamed body
// longer than the 300 bytes the log line had buffered.)
func TestBodyForwardedWhole(t *testing.T) {
	var ended atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ended.Load() {
			t.Errorf("the target got the request before the client had sent its body's end")
		}
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, "the answer to "+string(b[len(b)-11:]))
	}))
	defer target.Close()
	p, err := Start(target.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	start := strings.Repeat("s", 400) // more than the log line keeps
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(start))
		time.Sleep(100 * time.Millisecond)
		ended.Store(true)
		pw.Write([]byte(" a long one"))
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", p.URL+"/", pr)
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.Query")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "the answer to  a long one" {
		t.Fatalf("the client read %q, %v; want the target's whole answer to the whole body", b, err)
	}
	if log := p.Log(); len(log) != 1 || log[0] != "Query "+start[:300] {
		t.Fatalf("log %q: want the operation and the body's first 300 bytes", log)
	}
}

package reqcount

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestSequence: requests sent one after another make a chain as long as
// they are; requests sent at once (held at the proxy so that they overlap)
// add one round trip to it, however many they are; Take starts over.
func TestSequence(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer target.Close()
	p, err := Start(target.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Hold(20 * time.Millisecond)
	get := func() {
		resp, err := http.Get(p.URL + "/bucket/key")
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for range 3 {
		get()
	}
	if n := p.Sequence(); n != 3 {
		t.Fatalf("3 requests one after another: %d in sequence", n)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(get)
	}
	wg.Wait()
	if n := p.Sequence(); n != 4 {
		t.Fatalf("then 10 at once: %d in sequence, want 4", n)
	}
	if c := p.Take(); c.Total() != 13 {
		t.Fatalf("%d requests counted, want 13", c.Total())
	}
	if n := p.Sequence(); n != 0 {
		t.Fatalf("after Take: %d in sequence", n)
	}
	get()
	if n := p.Sequence(); n != 1 {
		t.Fatalf("one request after Take: %d in sequence", n)
	}
}

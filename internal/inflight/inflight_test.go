package inflight

import (
	"sync"
	"testing"
	"time"
)

// TestGauge: calls one after another are one in flight at a time; calls
// sent at once overlap in the gauge; Reset starts over.
func TestGauge(t *testing.T) {
	g := New(20 * time.Millisecond)
	for range 3 {
		g.Enter()()
	}
	if n := g.Most(); n != 1 {
		t.Fatalf("calls one after another: %d at once", n)
	}
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() { defer g.Enter()() })
	}
	wg.Wait()
	if n := g.Most(); n != 5 {
		t.Fatalf("5 calls at once: most %d", n)
	}
	g.Reset()
	if n := g.Most(); n != 0 {
		t.Fatalf("after Reset with none in flight: %d", n)
	}
}

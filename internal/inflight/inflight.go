// Package inflight measures how many calls are in flight at once: a test
// wraps a client's calls in a Gauge, which holds each call for a while so
// that calls sent at once overlap whatever the machine's scheduling, and
// then asserts that a step sent its requests in parallel (Most > 1) and
// within its bound.
package inflight

import (
	"sync"
	"time"
)

// Gauge counts the calls in flight and the most seen at once.
type Gauge struct {
	hold     time.Duration
	mu       sync.Mutex
	inFlight int
	most     int
}

// New returns a Gauge that holds each call for hold.
func New(hold time.Duration) *Gauge { return &Gauge{hold: hold} }

// Enter counts a call in, holds it, and returns the function that counts
// it out: defer g.Enter()() around the call.
func (g *Gauge) Enter() (leave func()) {
	g.mu.Lock()
	g.inFlight++
	g.most = max(g.most, g.inFlight)
	g.mu.Unlock()
	time.Sleep(g.hold)
	return func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}
}

// Most returns the most calls in flight at once since the last Reset.
func (g *Gauge) Most() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most
}

// Reset starts Most over from the calls in flight now.
func (g *Gauge) Reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.most = g.inFlight
}

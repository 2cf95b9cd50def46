package s3fs

import (
	"testing"
	"time"
)

// TestServerClockBounds: responses from a server whose clock runs 10.4 s
// ahead, with second-truncated Dates and 20 ms round trips, bound the
// offset ever tighter around 10.4 s; a stepped clock starts it over.
func TestServerClockBounds(t *testing.T) {
	var c serverClock
	if c.uncertainty() != -1 || time.Since(c.now()).Abs() > time.Second {
		t.Fatal("before any response the clock is not the host's")
	}
	const skew = 10*time.Second + 400*time.Millisecond
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i := range 40 {
		sent := base.Add(time.Duration(i) * 137 * time.Millisecond)
		at := sent.Add(10 * time.Millisecond) // the server reads its clock
		c.sample(at.Add(skew).Truncate(time.Second), sent, sent.Add(20*time.Millisecond))
	}
	if c.lo > skew || c.hi < skew {
		t.Fatalf("bounds [%v, %v] exclude the true offset %v", c.lo, c.hi, skew)
	}
	if u := c.uncertainty(); u > 200*time.Millisecond {
		t.Fatalf("uncertainty %v after 40 responses spread over 5 s", u)
	}
	if d := c.now().Sub(time.Now().Add(skew)).Abs(); d > 200*time.Millisecond {
		t.Fatalf("estimate off by %v", d)
	}
	// The server's clock is stepped back a minute: the old bounds go.
	sent := base.Add(time.Minute)
	c.sample(sent.Add(skew-time.Minute).Truncate(time.Second), sent, sent.Add(20*time.Millisecond))
	if c.lo > skew-time.Minute || c.hi < skew-time.Minute {
		t.Fatalf("after a step the bounds [%v, %v] exclude %v", c.lo, c.hi, skew-time.Minute)
	}
}

package sweep

import (
	"testing"
	"time"
)

func TestLimiterDebt(t *testing.T) {
	now := time.Unix(0, 0)
	l := newLimiter(100, func() time.Time { return now })
	// The bucket starts with one second of budget.
	if d := l.take(100); d != 0 {
		t.Fatalf("first 100 units waited %v", d)
	}
	// 50 more units are half a second of debt.
	if d := l.take(50); d != 500*time.Millisecond {
		t.Fatalf("debt of 50 at 100/s waits %v, want 500ms", d)
	}
	now = now.Add(500 * time.Millisecond)
	if d := l.take(0); d != 0 {
		t.Fatalf("after paying the debt: wait %v", d)
	}
	// Idle time refills at most one second of budget.
	now = now.Add(time.Hour)
	if d := l.take(150); d != 500*time.Millisecond {
		t.Fatalf("after an hour idle, 150 units wait %v, want 500ms", d)
	}
	// Giving back an overestimate pays debt.
	if d := l.take(-50); d != 0 {
		t.Fatalf("refund still waits %v", d)
	}
	unlimited := newLimiter(0, time.Now)
	if d := unlimited.take(1e9); d != 0 {
		t.Fatalf("unlimited waits %v", d)
	}
}

package sweep

import (
	"context"
	"github.com/lakemeta/lake/internal/ddb"
	"math"
	"sync"
	"time"
)

// limiter bounds the rate of write capacity units across a sweep's segments.
// It is a token bucket holding at most one second of budget that may go into
// debt: a writer reports what it spends and waits while the bucket is below
// zero, so a sweep's average rate stays at most the bound over any window of
// a few seconds, whatever the size of single writes.
type limiter struct {
	rate float64 // units per second; 0: unlimited
	now  func() time.Time

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newLimiter(rate float64, now func() time.Time) *limiter {
	return &limiter{rate: rate, now: now, tokens: rate, last: now()}
}

// take spends units and returns how long the caller must wait before the
// bucket is out of debt again.
func (l *limiter) take(units float64) time.Duration {
	if l.rate <= 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.tokens = math.Min(l.rate, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	l.last = now
	l.tokens -= units
	if l.tokens >= 0 {
		return 0
	}
	return time.Duration(-l.tokens / l.rate * float64(time.Second))
}

// wait spends units and sleeps until the bucket is out of debt.
func (l *limiter) wait(ctx context.Context, units float64) error {
	d := l.take(units)
	if d <= 0 {
		return ctx.Err()
	}
	return ddb.Sleep(ctx, d)
}

// floatCounter is a float64 sum safe for concurrent use.
type floatCounter struct {
	mu sync.Mutex
	v  float64
}

func (c *floatCounter) add(v float64) {
	c.mu.Lock()
	c.v += v
	c.mu.Unlock()
}

func (c *floatCounter) load() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.v
}

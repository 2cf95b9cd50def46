package s3fs

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// serverClock estimates S3's own clock from the Date header of its
// responses, so that the locks on S3 stamp their records and judge expiry
// by the server's clock rather than each host's (lock.Clock). A Date is
// truncated to the second and was read by the server at some instant
// between sending the request and receiving the response, which bounds the
// offset (server minus local) on both sides; the bounds of every response
// are intersected, so the estimate tightens with traffic, and a sample that
// contradicts them (a clock was stepped) starts over.
type serverClock struct {
	mu     sync.Mutex
	lo, hi time.Duration
	ok     bool
}

func (c *serverClock) sample(date, sent, recv time.Time) {
	lo, hi := date.Sub(recv), date.Add(time.Second).Sub(sent)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ok || lo > c.hi || hi < c.lo {
		c.lo, c.hi, c.ok = lo, hi, true
		return
	}
	c.lo, c.hi = max(c.lo, lo), min(c.hi, hi)
}

// now returns the estimate of the server's clock now (the host's until a
// response has been seen).
func (c *serverClock) now() time.Time {
	c.mu.Lock()
	off := (c.lo + c.hi) / 2
	ok := c.ok
	c.mu.Unlock()
	if !ok {
		return time.Now()
	}
	return time.Now().Add(off)
}

// uncertainty is the width of the offset's bounds.
func (c *serverClock) uncertainty() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ok {
		return -1
	}
	return c.hi - c.lo
}

// recordDate is a per-call option that samples the Date of every response
// (each attempt of a retried request included).
func (c *serverClock) recordDate(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Deserialize.Add(middleware.DeserializeMiddlewareFunc("lakeServerClock",
			func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
				sent := time.Now()
				out, md, err := next.HandleDeserialize(ctx, in)
				if r, ok := out.RawResponse.(*smithyhttp.Response); ok && r != nil && r.Response != nil {
					if d, perr := http.ParseTime(r.Header.Get("Date")); perr == nil {
						c.sample(d, sent, time.Now())
					}
				}
				return out, md, err
			}), middleware.After)
	})
}

// ServerNow implements datastore.ServerClock: S3's clock as estimated from
// the Date of its responses, so that the datastore's locks (dslock) write
// and judge expiry by the server's clock, not by each host's.
func (d *Driver) ServerNow() time.Time { return d.c.clock.now() }

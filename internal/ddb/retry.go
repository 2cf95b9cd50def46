package ddb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// RetryOptions shape NewRetryer. The zero value means the defaults.
type RetryOptions struct {
	// MaxAttempts per logical operation, the first included; default 8.
	MaxAttempts int
	// BaseDelay and MaxDelay bound the full-jitter exponential backoff:
	// the wait before retry n is uniform in [0, min(MaxDelay, BaseDelay*2^n)).
	// Defaults 25ms and 2s.
	BaseDelay, MaxDelay time.Duration
}

// NewRetryer returns the SDK's standard retryer as lake configures it: its
// classification of retryable errors (throttling, 5xx, connection errors),
// plus cancelled transactions whose reasons are all transient (DynamoDB
// cancels a transaction that races another on one item, and the retry is
// safe under the idempotency token); no client-side retry quota, so a burst
// of faults does not turn into refusals; and a backoff sized for a metadata
// store's latencies.
func NewRetryer(o RetryOptions) aws.Retryer {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 8
	}
	if o.BaseDelay <= 0 {
		o.BaseDelay = 25 * time.Millisecond
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = 2 * time.Second
	}
	return retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = o.MaxAttempts
		so.MaxBackoff = o.MaxDelay
		so.Backoff = jitter{base: o.BaseDelay, max: o.MaxDelay}
		so.RateLimiter = ratelimit.None
		so.Retryables = append(so.Retryables, retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
			if OnlyTransientReasons(err) {
				return aws.TrueTernary
			}
			return aws.UnknownTernary
		}))
	})
}

// jitter is full-jitter exponential backoff.
type jitter struct{ base, max time.Duration }

// BackoffDelay implements retry.BackoffDelayer.
func (j jitter) BackoffDelay(attempt int, _ error) (time.Duration, error) {
	ceiling := j.max
	if attempt < 30 && j.base<<attempt < j.max {
		ceiling = j.base << attempt
	}
	return time.Duration(rand.Int64N(int64(ceiling) + 1)), nil
}

// Retry runs attempt until it succeeds, fails with an error r does not
// retry, or r's attempts run out, waiting r's backoff in between; attempt
// gets the number of the attempt, from 1. It stops when ctx ends, with
// ctx's error wrapping the last attempt's. The loop is bounded by
// r.MaxAttempts().
func Retry(ctx context.Context, r aws.Retryer, attempt func(n int) error) error {
	var err error
	for n := 1; ; n++ {
		if cerr := ctx.Err(); cerr != nil {
			if err == nil {
				return cerr
			}
			return fmt.Errorf("%w (last error: %v)", cerr, err)
		}
		err = attempt(n)
		if err == nil || n >= r.MaxAttempts() || !r.IsErrorRetryable(err) {
			return err
		}
		delay, derr := r.RetryDelay(n, err)
		if derr != nil {
			return err
		}
		Sleep(ctx, delay)
	}
}

// Sleep waits d or until ctx ends, and returns ctx's error if it ended.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Backoff waits before attempt n (from 0) of a caller's own loop that lost
// a race on an item (not a failed request: those Retry handles): a short,
// capped, doubling pause (1ms·2^n, at most 64ms), so that two writers of one
// item do not keep cancelling each other. It returns ctx's error if ctx
// ended. The caller bounds the number of attempts.
func Backoff(ctx context.Context, n int) error {
	return Sleep(ctx, time.Duration(1<<min(max(n, 0), 6))*time.Millisecond)
}

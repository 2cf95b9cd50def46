package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/lakemeta/lake/metastore"
)

// ErrNoTable is returned when a table the layout needs does not exist.
var ErrNoTable = errors.New("lake: DynamoDB table does not exist")

// ErrLayoutMismatch is returned by Open when the v2 table's frozen layout
// parameters differ from this process's: two processes computing different
// buckets for one key would corrupt data, so the store refuses to open.
var ErrLayoutMismatch = fmt.Errorf("%w: layout parameters differ from the table's", metastore.ErrRefused)

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
			if onlyTransientReasons(err) {
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

// onlyTransientReasons reports whether err is a cancelled transaction whose
// every reason is transient (a conflict with another transaction, throttling)
// or None: nothing was applied and a retry may succeed.
func onlyTransientReasons(err error) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || len(tce.CancellationReasons) == 0 {
		return false
	}
	transient := false
	for _, r := range tce.CancellationReasons {
		switch aws.ToString(r.Code) {
		case "None", "":
		case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
			transient = true
		default:
			return false
		}
	}
	return transient
}

// surelyNotApplied reports whether a failed write attempt certainly changed
// nothing: DynamoDB answered with a refusal. Any other failure (a lost
// response, a reset, a 5xx) may hide an applied write.
func surelyNotApplied(err error) bool {
	if onlyTransientReasons(err) {
		return true
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded",
		"ConditionalCheckFailedException", "TransactionCanceledException", "ValidationException",
		"ResourceNotFoundException", "IdempotentParameterMismatchException":
		return true
	}
	return false
}

// retry runs attempt until it succeeds, fails with a non-retryable error, or
// the retryer's attempts run out, waiting the retryer's delay in between.
// attempt gets the number of the attempt, from 1.
func (d *Driver) retry(ctx context.Context, attempt func(n int) error) error {
	var err error
	for n := 1; ; n++ {
		if cerr := ctx.Err(); cerr != nil {
			if err == nil {
				return cerr
			}
			return fmt.Errorf("%w (last error: %v)", cerr, err)
		}
		err = attempt(n)
		if err == nil || n >= d.retryer.MaxAttempts() || !d.retryer.IsErrorRetryable(err) {
			return err
		}
		delay, derr := d.retryer.RetryDelay(n, err)
		if derr != nil {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// classify translates an SDK error into the contract's errors. keys names
// the logical key of each item of a transaction, for conflict messages.
func (d *Driver) classify(err error, table string, keys ...string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for i, r := range tce.CancellationReasons {
			if aws.ToString(r.Code) == "ConditionalCheckFailed" {
				key := "?"
				if i < len(keys) {
					key = keys[i]
				}
				return metastore.Conflict(key, conflictReason(i, len(keys)))
			}
		}
		if onlyTransientReasons(err) {
			return fmt.Errorf("%w: transaction kept conflicting or being throttled: %v", metastore.ErrUnavailable, err)
		}
		return fmt.Errorf("lake: transaction cancelled: %w", err)
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		key := "?"
		if len(keys) > 0 {
			key = keys[0]
		}
		return metastore.Conflict(key, "current value differs from expected")
	}
	var rnf *types.ResourceNotFoundException
	if errors.As(err, &rnf) {
		return fmt.Errorf("%w: %q (run `lake init` with this store URL to create it)", ErrNoTable, table)
	}
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" {
		return fmt.Errorf("%w: DynamoDB refused the request: %s", metastore.ErrInvalidArgument, ae.ErrorMessage())
	}
	if d.retryer.IsErrorRetryable(err) {
		return fmt.Errorf("%w: %v", metastore.ErrUnavailable, err)
	}
	return fmt.Errorf("lake: dynamodb: %w", err)
}

func conflictReason(i, n int) string {
	if n == 2 && i == 0 {
		return "guard does not hold its expected value"
	}
	return "current value differs from expected"
}

func asCanceled(err error) (*types.TransactionCanceledException, bool) {
	var tce *types.TransactionCanceledException
	ok := errors.As(err, &tce)
	return tce, ok
}

package dynamofs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/lakemeta/lake/metastore"
)

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }

// retry runs attempt until it succeeds, fails with an error the retryer does
// not retry, or the attempts run out, waiting the retryer's backoff between.
func (d *Driver) retry(ctx context.Context, attempt func() error) error {
	var err error
	for n := 1; ; n++ {
		if cerr := ctx.Err(); cerr != nil {
			if err == nil {
				return cerr
			}
			return fmt.Errorf("%w (last error: %v)", cerr, err)
		}
		err = attempt()
		if err == nil || n >= d.retryer.MaxAttempts() || !d.retryer.IsErrorRetryable(err) {
			return err
		}
		delay, derr := d.retryer.RetryDelay(n, err)
		if derr != nil {
			return err
		}
		sleep(ctx, delay)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// classify translates an SDK error into the contract's errors; what names
// the item for a conflict.
func (d *Driver) classify(err error, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return metastore.Conflict(what, "record differs from expected")
	}
	var rnf *types.ResourceNotFoundException
	if errors.As(err, &rnf) {
		return fmt.Errorf("lake: DynamoDB table %s does not exist (run `lake data init` with this store URL to create it)", d.table)
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

// failedIndexes returns the indexes of a cancelled transaction's items whose
// condition failed; ok is false if err is not a cancelled transaction.
func failedIndexes(err error) (idx []int, ok bool) {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil, false
	}
	for i, r := range tce.CancellationReasons {
		if r.Code != nil && *r.Code == "ConditionalCheckFailed" {
			idx = append(idx, i)
		}
	}
	return idx, true
}

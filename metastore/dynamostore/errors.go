package dynamostore

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
)

// ErrNoTable is returned when a table the layout needs does not exist.
var ErrNoTable = errors.New("lake: DynamoDB table does not exist")

// ErrLayoutMismatch is returned by Open when the v2 table's frozen layout
// parameters differ from this process's: two processes computing different
// buckets for one key would corrupt data, so the store refuses to open.
var ErrLayoutMismatch = fmt.Errorf("%w: layout parameters differ from the table's", metastore.ErrRefused)

// retry runs attempt under the store's retry policy (ddb.Retry).
func (d *Driver) retry(ctx context.Context, attempt func(n int) error) error {
	return ddb.Retry(ctx, d.retryer, attempt)
}

// classify translates an SDK error into the contract's errors. keys names
// the logical key of each item of a transaction, for conflict messages.
func (d *Driver) classify(err error, table string, keys ...string) error {
	if err == nil {
		return nil
	}
	if ddb.Classify(err) == ddb.Canceled {
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
		if ddb.OnlyTransientReasons(err) {
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
	return ddb.Translate(err, d.retryer)
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

package dynamofs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
)

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }

// retry runs attempt under the driver's retry policy (ddb.Retry).
func (d *Driver) retry(ctx context.Context, attempt func() error) error {
	return ddb.Retry(ctx, d.retryer, func(int) error { return attempt() })
}

func sleep(ctx context.Context, d time.Duration) { _ = ddb.Sleep(ctx, d) }

// classify translates an SDK error into the contract's errors; what names
// the item for a conflict.
func (d *Driver) classify(err error, what string) error {
	if err == nil {
		return nil
	}
	if ddb.Classify(err) == ddb.Canceled {
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
	return ddb.Translate(err, d.retryer)
}

// failedIndexes returns the indexes of a cancelled transaction's items whose
// condition failed; ok is false if err is not a cancelled transaction.
func failedIndexes(err error) (idx []int, ok bool) { return ddb.FailedConditions(err) }

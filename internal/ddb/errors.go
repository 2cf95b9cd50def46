package ddb

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/lakemeta/lake/metastore"
)

// Class is what a failed DynamoDB request means for its caller.
type Class int

// The classes of Classify.
const (
	// Other is an error none of the classes below explains.
	Other Class = iota
	// Canceled: the caller's context ended.
	Canceled
	// ConditionFailed: a single-item write's condition failed; nothing
	// was applied.
	ConditionFailed
	// Cancelled: a transaction was cancelled; Reasons says why, item by
	// item. Nothing was applied.
	Cancelled
	// Throttled: DynamoDB refused the request for now; nothing applied.
	Throttled
	// NotFound: the table (or index) does not exist.
	NotFound
	// Invalid: DynamoDB refused the request as malformed.
	Invalid
	// Ambiguous: the request may or may not have been applied (a lost
	// response, a reset or timed-out connection, a 5xx).
	Ambiguous
)

// Classify returns err's class. An error that DynamoDB did not answer
// (a transport error) is Ambiguous: a write may have landed.
func Classify(err error) Class {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Canceled
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return Ambiguous
	}
	switch ae.ErrorCode() {
	case "ConditionalCheckFailedException":
		return ConditionFailed
	case "TransactionCanceledException":
		return Cancelled
	case "ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded":
		return Throttled
	case "ResourceNotFoundException":
		return NotFound
	case "ValidationException", "IdempotentParameterMismatchException":
		return Invalid
	case "InternalServerError", "ServiceUnavailable":
		return Ambiguous
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) && re.HTTPStatusCode() >= 500 {
		return Ambiguous
	}
	return Other
}

// OnlyTransientReasons reports whether err is a cancelled transaction whose
// every reason is transient (a conflict with another transaction, throttling)
// or None: nothing was applied and a retry may succeed.
func OnlyTransientReasons(err error) bool {
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

// SurelyNotApplied reports whether a failed write attempt certainly changed
// nothing: DynamoDB answered with a refusal. Any other failure (a lost
// response, a reset, a 5xx) may hide an applied write.
func SurelyNotApplied(err error) bool {
	if OnlyTransientReasons(err) {
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

// FailedConditions returns the indexes of a cancelled transaction's items
// whose condition failed; ok is false if err is not a cancelled transaction.
func FailedConditions(err error) (idx []int, ok bool) {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil, false
	}
	for i, r := range tce.CancellationReasons {
		if aws.ToString(r.Code) == "ConditionalCheckFailed" {
			idx = append(idx, i)
		}
	}
	return idx, true
}

// Translate turns an SDK error that the caller did not explain itself (a
// failed condition, a missing table: their words are the caller's) into the
// contract's errors: the context's own error as is, a ValidationException as
// metastore.ErrInvalidArgument, what r retries (throttling, 5xx, connection
// errors) as metastore.ErrUnavailable, anything else wrapped once as
// "lake: dynamodb: …".
func Translate(err error, r aws.Retryer) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" {
		return fmt.Errorf("%w: DynamoDB refused the request: %s", metastore.ErrInvalidArgument, ae.ErrorMessage())
	}
	if r.IsErrorRetryable(err) {
		return fmt.Errorf("%w: %v", metastore.ErrUnavailable, err)
	}
	return fmt.Errorf("lake: dynamodb: %w", err)
}

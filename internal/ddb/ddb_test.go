package ddb_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
)

func TestMeterPerTableAndOperation(t *testing.T) {
	var m ddb.Meter
	m.Record("Query", ddb.Use{Table: "a", Evaluated: 7, Returned: 2, Capacity: ddb.Capacity(&types.ConsumedCapacity{CapacityUnits: aws.Float64(1.5)})})
	before := m.Snapshot()
	m.Record("PutItem", ddb.Use{Table: "a", Written: 1, Capacity: ddb.Capacity(&types.ConsumedCapacity{CapacityUnits: aws.Float64(2)})})
	// A transaction over two tables: each capacity entry counts under its
	// own table, the request under the first.
	m.Record("TransactWriteItems", ddb.Use{Written: 2, Capacity: []types.ConsumedCapacity{
		{TableName: aws.String("a"), WriteCapacityUnits: aws.Float64(2)},
		{TableName: aws.String("b"), WriteCapacityUnits: aws.Float64(4)},
	}})
	s := m.Snapshot()
	if got := s[ddb.Op{"a", "Query"}]; got != (ddb.Counts{Requests: 1, Evaluated: 7, Returned: 2, ReadUnits: 1.5}) {
		t.Errorf("Query on a = %+v", got)
	}
	if got := s[ddb.Op{"a", "PutItem"}]; got != (ddb.Counts{Requests: 1, Written: 1, WriteUnits: 2}) {
		t.Errorf("PutItem on a = %+v (a total alone must count as write units for a write)", got)
	}
	if got := s[ddb.Op{"b", "TransactWriteItems"}]; got != (ddb.Counts{WriteUnits: 4}) {
		t.Errorf("TransactWriteItems on b = %+v", got)
	}
	d := s.Sub(before)
	if _, ok := d[ddb.Op{"a", "Query"}]; ok {
		t.Errorf("Sub kept an unchanged op: %+v", d)
	}
	if tot := d.Total(); tot.Requests != 2 || tot.Written != 3 || tot.WriteUnits != 8 {
		t.Errorf("Total of the difference = %+v", tot)
	}
	if n := d.ByOperation()["TransactWriteItems"].WriteUnits; n != 6 {
		t.Errorf("ByOperation sums tables: %v, want 6", n)
	}
}

type apiErr struct{ code string }

func (e apiErr) Error() string                 { return e.code }
func (e apiErr) ErrorCode() string             { return e.code }
func (e apiErr) ErrorMessage() string          { return e.code }
func (e apiErr) ErrorFault() smithy.ErrorFault { return smithy.FaultServer }

func TestClassify(t *testing.T) {
	reasons := func(codes ...string) error {
		var rs []types.CancellationReason
		for _, c := range codes {
			rs = append(rs, types.CancellationReason{Code: aws.String(c)})
		}
		return &types.TransactionCanceledException{Message: aws.String("cancelled"), CancellationReasons: rs}
	}
	for _, tc := range []struct {
		name      string
		err       error
		class     ddb.Class
		notApplid bool
	}{
		{"condition", &types.ConditionalCheckFailedException{Message: aws.String("x")}, ddb.ConditionFailed, true},
		{"throttled", apiErr{"ThrottlingException"}, ddb.Throttled, true},
		{"no table", &types.ResourceNotFoundException{Message: aws.String("x")}, ddb.NotFound, true},
		{"invalid", apiErr{"ValidationException"}, ddb.Invalid, true},
		{"5xx", apiErr{"InternalServerError"}, ddb.Ambiguous, false},
		{"lost response", fmt.Errorf("read: %w", errors.New("connection reset by peer")), ddb.Ambiguous, false},
		{"cancelled transient", reasons("None", "TransactionConflict"), ddb.Cancelled, true},
		{"cancelled condition", reasons("ConditionalCheckFailed", "None"), ddb.Cancelled, true},
		{"context", context.DeadlineExceeded, ddb.Canceled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ddb.Classify(tc.err); got != tc.class {
				t.Errorf("Classify = %v, want %v", got, tc.class)
			}
			if got := ddb.SurelyNotApplied(tc.err); got != tc.notApplid {
				t.Errorf("SurelyNotApplied = %v, want %v", got, tc.notApplid)
			}
		})
	}
	if idx, ok := ddb.FailedConditions(reasons("None", "ConditionalCheckFailed")); !ok || len(idx) != 1 || idx[0] != 1 {
		t.Errorf("FailedConditions = %v %v", idx, ok)
	}
	if !ddb.OnlyTransientReasons(reasons("None", "ThrottlingError")) || ddb.OnlyTransientReasons(reasons("ConditionalCheckFailed")) {
		t.Error("OnlyTransientReasons misjudges")
	}
	if err := ddb.Translate(apiErr{"ValidationException"}, ddb.NewRetryer(ddb.RetryOptions{})); !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Errorf("Translate(ValidationException) = %v", err)
	}
}

func TestRetryIsBoundedAndStopsOnContext(t *testing.T) {
	r := ddb.NewRetryer(ddb.RetryOptions{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond})
	n := 0
	err := ddb.Retry(t.Context(), r, func(int) error { n++; return apiErr{"ThrottlingException"} })
	if n != 3 || err == nil {
		t.Fatalf("%d attempts, err %v; want 3 and the last error", n, err)
	}
	n = 0
	if err := ddb.Retry(t.Context(), r, func(int) error { n++; return &types.ConditionalCheckFailedException{} }); n != 1 || err == nil {
		t.Fatalf("a failed condition was retried: %d attempts, %v", n, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := ddb.Retry(ctx, r, func(int) error { t.Fatal("attempt after cancel"); return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Retry after cancel = %v", err)
	}
}

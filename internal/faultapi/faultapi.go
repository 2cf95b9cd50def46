// Package faultapi injects faults between a store and DynamoDB at the level
// of the store's narrow client interface: it drops requests, forwards
// requests and drops their responses, and answers with the errors DynamoDB
// Local never produces (5xx, throttling, transaction conflicts). Tests use it
// to prove that retries are safe and that ambiguous outcomes are resolved.
package faultapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/lakemeta/lake/internal/ddb"
)

// Fault is what happens to one call.
type Fault int

// The faults.
const (
	None         Fault = iota
	DropRequest        // fail before sending: nothing applied
	DropResponse       // forward, then fail as if the response was lost
	ServerError        // a 500 InternalServerError, nothing applied
	Throttle           // ProvisionedThroughputExceededException, nothing applied
	TxConflict         // TransactionCanceledException{TransactionConflict}, nothing applied; TransactWriteItems and TransactGetItems only
	numFaults
)

var names = [...]string{"none", "drop-request", "drop-response", "server-error", "throttle", "tx-conflict"}

// String names the fault.
func (f Fault) String() string {
	if f >= 0 && int(f) < len(names) {
		return names[f]
	}
	return "fault?"
}

// Plan decides the fault of each call from the operation's name and the
// logical write's token (empty for reads), which tells a write's first
// attempt from its retries: a TransactWriteItems's ClientRequestToken, or the
// token a store stamps on the item of a PutItem (attribute "w").
type Plan func(op, token string) Fault

// API wraps a DynamoDB API and injects the faults its plan chooses.
type API struct {
	next     ddb.API
	mu       sync.Mutex
	plan     Plan
	injected map[Fault]int
	forget   bool
	calls    int
	// nonce makes forgotten tokens unique across APIs and test runs:
	// DynamoDB (Local included) remembers a token for ten minutes, and a
	// token reused with other parameters is refused.
	nonce string
}

// New wraps next; plan may be nil (no faults) and be set later with SetPlan.
func New(next ddb.API, plan Plan) *API {
	var b [6]byte
	rand.Read(b[:])
	return &API{next: next, plan: plan, injected: map[Fault]int{}, nonce: hex.EncodeToString(b[:])}
}

// SetPlan replaces the plan.
func (a *API) SetPlan(p Plan) {
	a.mu.Lock()
	a.plan = p
	a.mu.Unlock()
}

// Injected returns how many faults of each kind were injected.
func (a *API) Injected() map[Fault]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[Fault]int, len(a.injected))
	for k, v := range a.injected {
		out[k] = v
	}
	return out
}

// ForgetTokens makes every TransactWriteItems reach DynamoDB with a fresh
// ClientRequestToken, as if DynamoDB had forgotten the token of an earlier
// attempt (it remembers one for ten minutes), so that the store's read-back
// path is exercised.
func (a *API) ForgetTokens(on bool) {
	a.mu.Lock()
	a.forget = on
	a.mu.Unlock()
}

func (a *API) decide(op, token string) Fault {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.plan == nil {
		return None
	}
	f := a.plan(op, token)
	if f == TxConflict && op != "TransactWriteItems" && op != "TransactGetItems" {
		f = ServerError
	}
	if f != None {
		a.injected[f]++
	}
	return f
}

// lostConnection is the error a client sees when a connection breaks: the
// request may or may not have reached the server.
func lostConnection() error {
	return &smithyhttp.RequestSendError{Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}
}

func serverError() error {
	return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 500}},
		Err:      &types.InternalServerError{Message: aws.String("injected internal server error")},
	}}
}

func inject[T any](a *API, op, token string, call func() (*T, error)) (*T, error) {
	switch a.decide(op, token) {
	case DropRequest:
		return nil, lostConnection()
	case DropResponse:
		if _, err := call(); err != nil {
			return nil, err
		}
		return nil, lostConnection()
	case ServerError:
		return nil, serverError()
	case Throttle:
		return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("injected throttling")}
	case TxConflict:
		return nil, &types.TransactionCanceledException{
			Message:             aws.String("Transaction cancelled (injected)"),
			CancellationReasons: []types.CancellationReason{{Code: aws.String("TransactionConflict")}},
		}
	}
	return call()
}

// IsInjected reports whether err is one of the errors this package makes.
func IsInjected(err error) bool {
	var rse *smithyhttp.RequestSendError
	return errors.As(err, &rse)
}

// GetItem implements the store's API.
func (a *API) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return inject(a, "GetItem", "", func() (*dynamodb.GetItemOutput, error) { return a.next.GetItem(ctx, in, o...) })
}

// PutItem implements the store's API.
func (a *API) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return inject(a, "PutItem", putToken(in), func() (*dynamodb.PutItemOutput, error) { return a.next.PutItem(ctx, in, o...) })
}

// UpdateItem implements the store's API.
func (a *API) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return inject(a, "UpdateItem", "", func() (*dynamodb.UpdateItemOutput, error) { return a.next.UpdateItem(ctx, in, o...) })
}

// Query implements the store's API.
func (a *API) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return inject(a, "Query", "", func() (*dynamodb.QueryOutput, error) { return a.next.Query(ctx, in, o...) })
}

// Scan implements the store's API.
func (a *API) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return inject(a, "Scan", "", func() (*dynamodb.ScanOutput, error) { return a.next.Scan(ctx, in, o...) })
}

// TransactWriteItems implements the store's API.
func (a *API) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	token := aws.ToString(in.ClientRequestToken)
	a.mu.Lock()
	forget := a.forget
	a.calls++
	n := a.calls
	a.mu.Unlock()
	sent := in
	if forget {
		cp := *in
		cp.ClientRequestToken = aws.String(fmt.Sprintf("forgotten-%s-%d", a.nonce, n))
		sent = &cp
	}
	return inject(a, "TransactWriteItems", token, func() (*dynamodb.TransactWriteItemsOutput, error) { return a.next.TransactWriteItems(ctx, sent, o...) })
}

// TransactGetItems implements the store's API.
func (a *API) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	return inject(a, "TransactGetItems", "", func() (*dynamodb.TransactGetItemsOutput, error) { return a.next.TransactGetItems(ctx, in, o...) })
}

// BatchGetItem implements the store's API.
func (a *API) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return inject(a, "BatchGetItem", "", func() (*dynamodb.BatchGetItemOutput, error) { return a.next.BatchGetItem(ctx, in, o...) })
}

// BatchWriteItem implements the store's API.
func (a *API) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return inject(a, "BatchWriteItem", "", func() (*dynamodb.BatchWriteItemOutput, error) { return a.next.BatchWriteItem(ctx, in, o...) })
}

// CreateTable passes through without faults.
func (a *API) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, o ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return a.next.CreateTable(ctx, in, o...)
}

// DescribeTable passes through without faults.
func (a *API) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return a.next.DescribeTable(ctx, in, o...)
}

// UpdateTimeToLive passes through without faults.
func (a *API) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	return a.next.UpdateTimeToLive(ctx, in, o...)
}

// DeleteTable passes through without faults.
func (a *API) DeleteTable(ctx context.Context, in *dynamodb.DeleteTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error) {
	return a.next.DeleteTable(ctx, in, o...)
}

// UpdateTable passes through without faults.
func (a *API) UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error) {
	return a.next.UpdateTable(ctx, in, o...)
}

// Unwrap returns the wrapped client, so that a store derives its DynamoDB
// Streams client from the real one.
func (a *API) Unwrap() ddb.API { return a.next }

var _ ddb.API = (*API)(nil)

// putToken is the token a store stamped on the item of a PutItem.
func putToken(in *dynamodb.PutItemInput) string {
	if w, ok := in.Item["w"].(*types.AttributeValueMemberS); ok {
		return w.Value
	}
	return ""
}

// DropFirstResponse is a plan that forwards the first attempt of every
// logical write (every TransactWriteItems token, every token stamped on a
// PutItem) and loses its response: the write applied and the client does
// not know it. Retries pass.
func DropFirstResponse() Plan {
	var mu sync.Mutex
	seen := map[string]bool{}
	return func(op, token string) Fault {
		if op != "TransactWriteItems" && op != "PutItem" || token == "" {
			return None
		}
		mu.Lock()
		defer mu.Unlock()
		if seen[token] {
			return None
		}
		seen[token] = true
		return DropResponse
	}
}

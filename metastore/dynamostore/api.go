package dynamostore

import (
	"context"
	"maps"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// API is the narrow part of the DynamoDB client that lake uses. Depending on
// it, rather than on *dynamodb.Client, lets tests put a fault-injecting
// implementation between the store and DynamoDB.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	DeleteTable(ctx context.Context, in *dynamodb.DeleteTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// Stats is the cost a store asked of DynamoDB for user data: requests by
// operation, items evaluated (ScannedCount for Query and Scan, the item for a
// point read), items returned, and capacity units as the server reported
// them. Requests for lake's control records (layout parameters, family
// registry) are counted apart in ControlRequests and add nothing else.
type Stats struct {
	Requests map[string]int64
	// EvaluatedBy splits ItemsEvaluated by operation.
	EvaluatedBy     map[string]int64
	ItemsEvaluated  int64
	ItemsReturned   int64
	ReadCapacity    float64
	WriteCapacity   float64
	ControlRequests int64
}

// TotalRequests is the sum of Requests.
func (s Stats) TotalRequests() int64 {
	var n int64
	for _, v := range s.Requests {
		n += v
	}
	return n
}

// Sub returns s minus before, for the cost of what happened in between.
func (s Stats) Sub(before Stats) Stats {
	out := Stats{
		Requests:        map[string]int64{},
		EvaluatedBy:     map[string]int64{},
		ItemsEvaluated:  s.ItemsEvaluated - before.ItemsEvaluated,
		ItemsReturned:   s.ItemsReturned - before.ItemsReturned,
		ReadCapacity:    s.ReadCapacity - before.ReadCapacity,
		WriteCapacity:   s.WriteCapacity - before.WriteCapacity,
		ControlRequests: s.ControlRequests - before.ControlRequests,
	}
	for op, n := range s.Requests {
		if d := n - before.Requests[op]; d != 0 {
			out.Requests[op] = d
		}
	}
	for op, n := range s.EvaluatedBy {
		if d := n - before.EvaluatedBy[op]; d != 0 {
			out.EvaluatedBy[op] = d
		}
	}
	return out
}

// meter accumulates Stats; safe for concurrent use.
type meter struct {
	mu sync.Mutex
	s  Stats
}

func (m *meter) snapshot() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.s
	out.Requests = maps.Clone(m.s.Requests)
	out.EvaluatedBy = maps.Clone(m.s.EvaluatedBy)
	if out.Requests == nil {
		out.Requests = map[string]int64{}
	}
	if out.EvaluatedBy == nil {
		out.EvaluatedBy = map[string]int64{}
	}
	return out
}

func (m *meter) request(op string, evaluated, returned int32, cc ...types.ConsumedCapacity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.s.Requests == nil {
		m.s.Requests, m.s.EvaluatedBy = map[string]int64{}, map[string]int64{}
	}
	m.s.Requests[op]++
	if evaluated > 0 {
		m.s.EvaluatedBy[op] += int64(evaluated)
	}
	m.s.ItemsEvaluated += int64(evaluated)
	m.s.ItemsReturned += int64(returned)
	for _, c := range cc {
		m.s.ReadCapacity += aws.ToFloat64(c.ReadCapacityUnits)
		m.s.WriteCapacity += aws.ToFloat64(c.WriteCapacityUnits)
		if c.ReadCapacityUnits == nil && c.WriteCapacityUnits == nil {
			// Some responses only give the total; attribute it by operation.
			if op == "TransactWriteItems" || op == "PutItem" || op == "BatchWriteItem" {
				m.s.WriteCapacity += aws.ToFloat64(c.CapacityUnits)
			} else {
				m.s.ReadCapacity += aws.ToFloat64(c.CapacityUnits)
			}
		}
	}
}

func (m *meter) control() {
	m.mu.Lock()
	m.s.ControlRequests++
	m.mu.Unlock()
}

func ccOf(c *types.ConsumedCapacity) []types.ConsumedCapacity {
	if c == nil {
		return nil
	}
	return []types.ConsumedCapacity{*c}
}

package dynamostore

import (
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
)

// Stats is the cost a store asked of DynamoDB for user data: requests by
// operation, items evaluated (ScannedCount for Query and Scan, the item for a
// point read), items returned, and capacity units as the server reported
// them. Requests for lake's control records (layout parameters, family
// registry) are counted apart in ControlRequests and add nothing else.
type Stats struct {
	ddb.OpRequests
	// EvaluatedBy splits ItemsEvaluated by operation.
	EvaluatedBy     map[string]int64
	ItemsEvaluated  int64
	ItemsReturned   int64
	ReadCapacity    float64
	WriteCapacity   float64
	ControlRequests int64
}

// Sub returns s minus before, for the cost of what happened in between.
func (s Stats) Sub(before Stats) Stats {
	return Stats{
		OpRequests:      s.SubRequests(before.OpRequests),
		EvaluatedBy:     ddb.SubOf(s.EvaluatedBy, before.EvaluatedBy),
		ItemsEvaluated:  s.ItemsEvaluated - before.ItemsEvaluated,
		ItemsReturned:   s.ItemsReturned - before.ItemsReturned,
		ReadCapacity:    s.ReadCapacity - before.ReadCapacity,
		WriteCapacity:   s.WriteCapacity - before.WriteCapacity,
		ControlRequests: s.ControlRequests - before.ControlRequests,
	}
}

// meter counts the store's requests in the shared DynamoDB meter, and its
// control requests apart.
type meter struct {
	ddb.Meter
	controls atomic.Int64
}

func (m *meter) snapshot() Stats {
	out := Stats{OpRequests: ddb.OpRequests{Requests: map[string]int64{}}, EvaluatedBy: map[string]int64{}, ControlRequests: m.controls.Load()}
	for op, c := range m.Snapshot().ByOperation() {
		if c.Requests != 0 {
			out.Requests[op] = c.Requests
		}
		if c.Evaluated > 0 {
			out.EvaluatedBy[op] = c.Evaluated
		}
		out.ItemsEvaluated += c.Evaluated
		out.ItemsReturned += c.Returned
		out.ReadCapacity += c.ReadUnits
		out.WriteCapacity += c.WriteUnits
	}
	return out
}

func (m *meter) request(op string, evaluated, returned int32, cc ...types.ConsumedCapacity) {
	m.Record(op, ddb.Use{Evaluated: int64(evaluated), Returned: int64(returned), Capacity: cc})
}

func (m *meter) control() { m.controls.Add(1) }

func ccOf(c *types.ConsumedCapacity) []types.ConsumedCapacity { return ddb.Capacity(c) }

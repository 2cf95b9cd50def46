package dynamofs

import (
	"maps"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Stats is the cost the driver asked of DynamoDB: requests by operation,
// items read (ScannedCount for a Query, the items of a point or batch read)
// and capacity units as the server reported them, and the contention it
// met. Every namespace of a table shares one meter: a driver's Stats count
// all of them.
type Stats struct {
	Requests   map[string]int64
	ItemsRead  int64
	ReadUnits  float64
	WriteUnits float64
	// ItemsWritten counts the items of the writes that succeeded: each
	// item of a TransactWriteItems (a ConditionCheck included, which
	// DynamoDB bills as a write), each processed request of a
	// BatchWriteItem, one for a PutItem or UpdateItem.
	ItemsWritten int64
	// CommitRaces counts the commit attempts that lost a race (a path,
	// head or shard counter changed since the commit read it) and were
	// read again and retried.
	CommitRaces int64
	// TransactRetries counts the TransactWriteItems requests sent again
	// after a transient failure: DynamoDB cancelling a transaction that
	// touched an item another transaction held, throttling, a lost
	// response.
	TransactRetries int64
}

// TotalRequests is the sum of Requests.
func (s Stats) TotalRequests() int64 {
	var n int64
	for _, v := range s.Requests {
		n += v
	}
	return n
}

// Sub returns s minus before.
func (s Stats) Sub(before Stats) Stats {
	out := Stats{Requests: map[string]int64{}, ItemsRead: s.ItemsRead - before.ItemsRead,
		ReadUnits: s.ReadUnits - before.ReadUnits, WriteUnits: s.WriteUnits - before.WriteUnits,
		ItemsWritten: s.ItemsWritten - before.ItemsWritten, CommitRaces: s.CommitRaces - before.CommitRaces, TransactRetries: s.TransactRetries - before.TransactRetries}
	for op, n := range s.Requests {
		if d := n - before.Requests[op]; d != 0 {
			out.Requests[op] = d
		}
	}
	return out
}

type meter struct {
	mu sync.Mutex
	s  Stats
}

// Stats returns what the driver has cost so far.
func (d *Driver) Stats() Stats {
	d.meter.mu.Lock()
	defer d.meter.mu.Unlock()
	out := d.meter.s
	out.Requests = maps.Clone(d.meter.s.Requests)
	if out.Requests == nil {
		out.Requests = map[string]int64{}
	}
	return out
}

func (m *meter) add(op string, read int32, cc ...types.ConsumedCapacity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.s.Requests == nil {
		m.s.Requests = map[string]int64{}
	}
	m.s.Requests[op]++
	m.s.ItemsRead += int64(read)
	for _, c := range cc {
		r, w := aws.ToFloat64(c.ReadCapacityUnits), aws.ToFloat64(c.WriteCapacityUnits)
		if r == 0 && w == 0 {
			switch op {
			case "TransactWriteItems", "PutItem", "UpdateItem", "BatchWriteItem":
				w = aws.ToFloat64(c.CapacityUnits)
			default:
				r = aws.ToFloat64(c.CapacityUnits)
			}
		}
		m.s.ReadUnits += r
		m.s.WriteUnits += w
	}
}

func (m *meter) count(n *int64) { m.countN(n, 1) }

func (m *meter) countN(n *int64, by int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	*n += int64(by)
}

func one(c *types.ConsumedCapacity) []types.ConsumedCapacity {
	if c == nil {
		return nil
	}
	return []types.ConsumedCapacity{*c}
}

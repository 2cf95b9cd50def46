package ddb

import (
	"maps"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Op names what a Meter counts apart: one operation on one table.
type Op struct {
	Table string
	Name  string // the DynamoDB operation: "GetItem", "Query", …
}

// Counts is the cost of the requests of one Op.
type Counts struct {
	Requests int64
	// Evaluated counts the items DynamoDB read: ScannedCount for a Query
	// or Scan, the items found by a point or batch read.
	Evaluated int64
	// Returned counts the items the requests returned.
	Returned int64
	// Written counts the items of writes that succeeded.
	Written int64
	// ReadUnits and WriteUnits are the capacity the server reported.
	ReadUnits, WriteUnits float64
}

func (c Counts) plus(d Counts) Counts {
	return Counts{c.Requests + d.Requests, c.Evaluated + d.Evaluated, c.Returned + d.Returned, c.Written + d.Written,
		c.ReadUnits + d.ReadUnits, c.WriteUnits + d.WriteUnits}
}

func (c Counts) minus(d Counts) Counts {
	return Counts{c.Requests - d.Requests, c.Evaluated - d.Evaluated, c.Returned - d.Returned, c.Written - d.Written,
		c.ReadUnits - d.ReadUnits, c.WriteUnits - d.WriteUnits}
}

// Stats is what a Meter counted, per table and operation.
type Stats map[Op]Counts

// Sub returns s minus before, for the cost of what happened in between;
// an Op whose counts did not change is left out.
func (s Stats) Sub(before Stats) Stats {
	out := Stats{}
	for op, c := range s {
		if d := c.minus(before[op]); d != (Counts{}) {
			out[op] = d
		}
	}
	return out
}

// Total sums every Op.
func (s Stats) Total() Counts {
	var t Counts
	for _, c := range s {
		t = t.plus(c)
	}
	return t
}

// ByOperation sums the tables of each operation.
func (s Stats) ByOperation() map[string]Counts {
	out := map[string]Counts{}
	for op, c := range s {
		out[op.Name] = out[op.Name].plus(c)
	}
	return out
}

// Use is what one request cost, as its response tells.
type Use struct {
	// Table is the table the request is counted under; empty means the
	// table of its first Capacity entry.
	Table string
	// Evaluated, Returned and Written: see Counts.
	Evaluated, Returned, Written int64
	// Capacity is the response's consumed capacity; each entry counts
	// under its own table (a transaction's spans several).
	Capacity []types.ConsumedCapacity
}

// Meter counts the requests a client sent, per table and operation. It is
// safe for concurrent use; the zero value is ready.
type Meter struct {
	mu  sync.Mutex
	ops Stats
}

// Record counts one request of operation op.
func (m *Meter) Record(op string, u Use) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ops == nil {
		m.ops = Stats{}
	}
	table := u.Table
	if table == "" && len(u.Capacity) > 0 {
		table = aws.ToString(u.Capacity[0].TableName)
	}
	k := Op{table, op}
	m.ops[k] = m.ops[k].plus(Counts{Requests: 1, Evaluated: u.Evaluated, Returned: u.Returned, Written: u.Written})
	for _, c := range u.Capacity {
		ck := k
		if t := aws.ToString(c.TableName); t != "" {
			ck.Table = t
		}
		r, w := aws.ToFloat64(c.ReadCapacityUnits), aws.ToFloat64(c.WriteCapacityUnits)
		if r == 0 && w == 0 {
			// A response with the total alone (ReturnConsumedCapacity
			// TOTAL): attribute it by operation.
			if writes(op) {
				w = aws.ToFloat64(c.CapacityUnits)
			} else {
				r = aws.ToFloat64(c.CapacityUnits)
			}
		}
		m.ops[ck] = m.ops[ck].plus(Counts{ReadUnits: r, WriteUnits: w})
	}
}

func writes(op string) bool {
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem":
		return true
	}
	return false
}

// Snapshot returns what m counted so far.
func (m *Meter) Snapshot() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := maps.Clone(m.ops)
	if out == nil {
		out = Stats{}
	}
	return out
}

// Capacity makes a response's single consumed capacity (nil: none) a list
// for Use.Capacity.
func Capacity(c *types.ConsumedCapacity) []types.ConsumedCapacity {
	if c == nil {
		return nil
	}
	return []types.ConsumedCapacity{*c}
}

// SumOf returns the sum of a count per operation.
func SumOf(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// SubOf returns after minus before per key, leaving out keys that did not
// change; the result is never nil.
func SubOf(after, before map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, n := range after {
		if d := n - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// OpRequests is the request count of a driver's Stats, which embed it.
type OpRequests struct {
	// Requests counts requests by DynamoDB operation.
	Requests map[string]int64
}

// TotalRequests is the sum of Requests.
func (o OpRequests) TotalRequests() int64 { return SumOf(o.Requests) }

// SubRequests returns o minus before, leaving out operations whose count
// did not change.
func (o OpRequests) SubRequests(before OpRequests) OpRequests {
	return OpRequests{SubOf(o.Requests, before.Requests)}
}

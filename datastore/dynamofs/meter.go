package dynamofs

import (
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
)

// Stats is the cost the driver asked of DynamoDB: requests by operation,
// items read (ScannedCount for a Query, the items of a point or batch read)
// and capacity units as the server reported them, and the contention it
// met. Every namespace of a table shares one meter: a driver's Stats count
// all of them.
type Stats struct {
	ddb.OpRequests
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
	// ShardsKnown counts the changed shards of the index ChangedPartitions
	// answered from the known partitions' heads, read ahead, instead of a
	// Query (feed.go, knownFill).
	ShardsKnown int64
	// FeedsByKeys counts the partitions whose feed ChangesOfKeys read by
	// the paths their heads name (recentpaths.go), and FeedsByKeysMissed
	// those whose items were not what the head said, left to a Query.
	FeedsByKeys, FeedsByKeysMissed int64
	// CommitsPrefetched counts the commits built on a read the commit
	// before them made (prefetch.go).
	CommitsPrefetched int64
}

// Sub returns s minus before.
func (s Stats) Sub(before Stats) Stats {
	return Stats{OpRequests: s.SubRequests(before.OpRequests), ItemsRead: s.ItemsRead - before.ItemsRead,
		ReadUnits: s.ReadUnits - before.ReadUnits, WriteUnits: s.WriteUnits - before.WriteUnits,
		ItemsWritten: s.ItemsWritten - before.ItemsWritten, CommitRaces: s.CommitRaces - before.CommitRaces,
		TransactRetries: s.TransactRetries - before.TransactRetries, ShardsKnown: s.ShardsKnown - before.ShardsKnown,
		FeedsByKeys: s.FeedsByKeys - before.FeedsByKeys, FeedsByKeysMissed: s.FeedsByKeysMissed - before.FeedsByKeysMissed,
		CommitsPrefetched: s.CommitsPrefetched - before.CommitsPrefetched}
}

// meter counts the driver's requests in the shared DynamoDB meter, and
// the driver's own counters (contention, items written) beside it.
type meter struct {
	ddb.Meter
	mu sync.Mutex
	s  Stats // only the counters of the driver's own, not the requests, are kept here
}

// Stats returns what the driver has cost so far.
func (d *Driver) Stats() Stats {
	d.meter.mu.Lock()
	out := d.meter.s
	out.OpRequests, out.ItemsRead, out.ReadUnits, out.WriteUnits = ddb.OpRequests{}, 0, 0, 0
	d.meter.mu.Unlock()
	out.Requests = map[string]int64{}
	for op, c := range d.meter.Snapshot().ByOperation() {
		if c.Requests != 0 {
			out.Requests[op] = c.Requests
		}
		out.ItemsRead += c.Evaluated
		out.ReadUnits += c.ReadUnits
		out.WriteUnits += c.WriteUnits
	}
	return out
}

func (m *meter) add(op string, read int32, cc ...types.ConsumedCapacity) {
	m.Record(op, ddb.Use{Evaluated: int64(read), Capacity: cc})
}

func (m *meter) count(n *int64) { m.countN(n, 1) }

func (m *meter) countN(n *int64, by int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	*n += int64(by)
}

func one(c *types.ConsumedCapacity) []types.ConsumedCapacity { return ddb.Capacity(c) }

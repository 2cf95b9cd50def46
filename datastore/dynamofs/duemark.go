package dynamofs

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The due mark (issue 31) spares a reclaim the Queries of the reclaim
// shards where nothing can be due yet: 3 kinds of 16 shards are 48 Queries,
// which the lifecycle sent every few seconds in each namespace and found
// empty nearly every time (an upload's intent and a replaced version are due
// an hour after they were written).
//
// For each kind and shard, the mark keeps when a reclaim last read it and
// the earliest entry it left there (one not due yet, or one it could not
// remove). An entry is written with its own time in its key, so every entry
// written after that read carries a time at or after it: nothing there is
// due before min(earliest, read) + the kind's grace, and the reclaim skips
// the shard until then. The graces are the caller's of the moment, so a
// shorter horizon takes effect at once. The mark is only ever a reason to
// read later than the queue would allow by its clock skew: an entry written
// with a time before the read (a writer's slow clock, a commit that took
// its time from before its retries) waits at most that much longer, and a
// mark another client forged cannot hold a shard back past its read time +
// the grace (a read time in the future is not believed).
type dueMark struct {
	read     map[string]int64 // kind and shard ("g#07") → when last read, Unix ms
	earliest map[string]int64 // kind and shard → the earliest entry left, Unix ms
}

const (
	attrDueRead     = "read"
	attrDueEarliest = "earliest"
)

func (d *Driver) dueMarkKey() item { return key(d.pk("g#"), "due") }

// parseDueMark reads a mark item; what is not a time, or is later than now
// (Unix ms), is left out, and its shard is read.
func parseDueMark(it item, now int64) dueMark {
	m := dueMark{read: map[string]int64{}, earliest: map[string]int64{}}
	times := func(name string, into map[string]int64) {
		v, ok := it[name].(*types.AttributeValueMemberM)
		if !ok {
			return
		}
		for k, av := range v.Value {
			n, ok := av.(*types.AttributeValueMemberN)
			if !ok {
				continue
			}
			t, err := strconv.ParseInt(n.Value, 10, 64)
			if err != nil || t < 0 {
				continue
			}
			into[k] = t
		}
	}
	times(attrDueRead, m.read)
	times(attrDueEarliest, m.earliest)
	for k, t := range m.read {
		if t > now {
			delete(m.read, k)
		}
	}
	return m
}

// need reports whether shard sh of kind may hold an entry due before end
// (Unix ms: due means its time is before end).
func (m dueMark) need(kind, sh string, end int64) bool {
	r, ok := m.read[kind+sh]
	if !ok {
		return true
	}
	if e, ok := m.earliest[kind+sh]; ok && e < r {
		r = e
	}
	return end > r
}

// saw records a read of shard sh of kind at read (Unix ms), which left
// earliest (when left).
func (m dueMark) saw(kind, sh string, read, earliest int64, left bool) {
	m.read[kind+sh] = read
	if left {
		m.earliest[kind+sh] = earliest
	} else {
		delete(m.earliest, kind+sh)
	}
}

// item is the mark's item at k.
func (m dueMark) item(k item) item {
	times := func(from map[string]int64) types.AttributeValue {
		out := map[string]types.AttributeValue{}
		for k, t := range from {
			out[k] = &types.AttributeValueMemberN{Value: strconv.FormatInt(t, 10)}
		}
		return &types.AttributeValueMemberM{Value: out}
	}
	it := item{attrDueRead: times(m.read), attrDueEarliest: times(m.earliest)}
	for n, v := range k {
		it[n] = v
	}
	return it
}

// putDueMark writes the mark. Two reclaims may write it in either order:
// an older one's mark only makes the next reclaim read sooner.
func (d *Driver) putDueMark(ctx context.Context, m dueMark) error {
	return d.putItem(ctx, &dynamodb.PutItemInput{Item: m.item(d.dueMarkKey())})
}

// dueLimits are the Limits of the pages of a due read: the first page is one
// entry, which is all a read finds in most shards (none, or the first entry
// not yet due), and the pages grow when entries are due.
var dueLimits = []int32{1, 8, 64, 256}

// due calls fn for each entry of kind in pk whose time is before end (Unix
// ms), in time order, and returns the earliest entry left after: the first
// one not due, or a due one fn kept (left is false when none is left).
func (d *Driver) due(ctx context.Context, pk, kind string, end int64, fn func(item) (kept bool, err error)) (earliest int64, left bool, err error) {
	kc := expression.Key(attrPK).Equal(expression.Value(pk)).And(expression.Key(attrSK).Between(expression.Value(kind), expression.Value(kind+"~")))
	e, err := build(expression.NewBuilder().WithKeyCondition(kc))
	if err != nil {
		return 0, false, err
	}
	in := &dynamodb.QueryInput{KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}
	for page := 0; ; page++ {
		in.Limit = &dueLimits[min(page, len(dueLimits)-1)]
		out, err := d.query(ctx, in)
		if err != nil {
			return 0, false, err
		}
		for _, it := range out.Items {
			at, ok := dueTime(getS(it, attrSK), kind)
			if !ok {
				continue // not an entry lake writes: not read as one
			}
			if at >= end {
				if !left || at < earliest {
					earliest = at
				}
				return earliest, true, nil
			}
			kept, err := fn(it)
			if err != nil {
				return 0, false, err
			}
			if kept && !left {
				earliest, left = at, true
			}
		}
		if out.LastEvaluatedKey == nil {
			return earliest, left, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// dueTime is the time (Unix ms) in the sort key KIND MS#…; ok is false
// for a key of another shape (another client's item, left alone).
func dueTime(sk, kind string) (int64, bool) {
	if len(sk) < len(kind)+14 || sk[len(kind)+13] != '#' {
		return 0, false
	}
	t, err := strconv.ParseInt(sk[len(kind):len(kind)+13], 10, 64)
	return t, err == nil
}

// readStamp is the time a due read is recorded at: the caller's now, or the
// machine's clock if that is earlier (a caller's clock set ahead, as tests
// set it, would otherwise hide what is written after the read).
func readStamp(now time.Time) int64 {
	return min(now.UnixMilli(), time.Now().UnixMilli())
}

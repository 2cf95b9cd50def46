package dynamofs

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lakemeta/lake/datastore"
)

// Fewer Queries for the clash checks of a commit of many new files (issue
// 31). clashChecks asks, for each new file p, whether a live file exists
// below p/ in p's partition: one Query each, 300 for a first sync of 300
// files. A partition is instead read once, its live paths kept in a
// belowCache, when its head says that should take at most belowBatchPages
// pages (lake writes no more file items than its head's seq) and fewer
// pages than the new files it gets in the transaction (each would be a
// Query: a model's first sync puts its rows in the catalog's namespace
// partition, two or three at a time); a larger partition, a single new
// file, or a read that does not end within those pages keeps a Query per
// file. The answer is the same and is vouched for the same way: by the CAS
// of the partition's head in the same transaction, which every commit that
// changes the partition makes.
const (
	belowBatchPages = 3
	belowPageItems  = 100
)

// belowCache holds, per partition key, the sorted live paths of the
// partition (those not in the commit's own gone set), or nil when the
// partition is read per file.
type belowCache struct {
	puts  map[string]int      // new puts per partition key in this transaction
	pages map[string]int      // pk -> the pages its head's seq says a read of it takes
	paths map[string][]string // pk -> sorted live paths; absent: not read yet
	tried map[string]bool     // pk -> the one read was made (paths may be nil: too large)
	head  map[string]item     // pk -> its partition's head as the commit read it (carried)
}

// newBelowCache counts the new puts of entries per partition; lookup is the
// state the commit read (its partitions' heads among it).
func newBelowCache(d *Driver, entries []datastore.Entry, lookup func(item) item) *belowCache {
	c := &belowCache{puts: map[string]int{}, pages: map[string]int{}, paths: map[string][]string{}, tried: map[string]bool{}, head: map[string]item{}}
	for _, e := range entries {
		if e.Put != nil {
			part := d.partition(e.Put.Path)
			pk := d.filePK(part)
			c.puts[pk]++
			// Not a bound on what it holds: a foreign writer's file
			// items need no head (TestForeignFileItemClashes), and a
			// read that does not finish in belowBatchPages pages falls
			// back to a Query per file.
			c.pages[pk] = int(min(getN(lookup(d.headKey(part)), "seq")/belowPageItems, belowBatchPages)) + 1
			c.head[pk] = lookup(d.headKey(part))
		}
	}
	return c
}

// liveBelowBatched is liveBelow(ctx, pk, prefix, gone, tx) answered from
// one read of the partition when it has enough new files in this commit
// and is small enough.
func (d *Driver) liveBelowBatched(ctx context.Context, c *belowCache, pk, prefix string, gone map[string]bool, tx string) (string, error) {
	if c == nil {
		return d.liveBelow(ctx, pk, prefix, gone, tx)
	}
	if !c.tried[pk] {
		if live, ok := carried(ctx, pk, c.head[pk], gone); ok { // stagebatch.go
			c.tried[pk] = true
			c.paths[pk] = live
		} else {
			if c.pages[pk] > belowBatchPages || c.puts[pk] <= c.pages[pk] {
				return d.liveBelow(ctx, pk, prefix, gone, tx)
			}
			c.tried[pk] = true
			live, complete, err := d.livePaths(ctx, pk, gone, tx)
			if err != nil {
				return "", err
			}
			if complete {
				c.paths[pk] = live
			}
		}
		if live, ok := c.paths[pk]; ok {
			carry(ctx, pk, live, c.head[pk])
		}
	}
	live, ok := c.paths[pk]
	if !ok {
		return d.liveBelow(ctx, pk, prefix, gone, tx)
	}
	i := sort.SearchStrings(live, prefix)
	if i < len(live) && strings.HasPrefix(live[i], prefix) {
		return live[i], nil
	}
	return "", nil
}

// livePaths reads the live paths of partition key pk (not in gone, as
// clashLive counts them for tx), sorted, and reports whether it read all of
// them within belowBatchPages pages.
func (d *Driver) livePaths(ctx context.Context, pk string, gone map[string]bool, tx string) ([]string, bool, error) {
	var live []string
	var start item
	for range belowBatchPages {
		items, next, err := d.belowPage(ctx, pk, "", start)
		if err != nil {
			return nil, false, err
		}
		for _, it := range items {
			if p := getS(it, attrSK); !gone[p] && clashLive(it, tx) {
				live = append(live, p)
			}
		}
		if next == nil {
			slices.Sort(live)
			return live, true, nil
		}
		start = next
	}
	return nil, false, nil
}

// belowPage reads one page (at most 100 items) of the file items of pk
// whose path starts with prefix ("" for all) that may be live: the same
// read as liveBelow's (clash.go, belowQuery), which keeps its own loop.
func (d *Driver) belowPage(ctx context.Context, pk, prefix string, start item) ([]item, item, error) {
	e, err := belowQuery(pk, prefix)
	if err != nil {
		return nil, nil, err
	}
	out, err := d.query(ctx, &dynamodb.QueryInput{KeyConditionExpression: e.KeyCondition(), FilterExpression: e.Filter(),
		ProjectionExpression: e.Projection(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ExclusiveStartKey: start, Limit: aws32(belowPageItems)})
	if err != nil {
		return nil, nil, err
	}
	return out.Items, out.LastEvaluatedKey, nil
}

// mayHoldFiles reports whether a model whose head is h (as the commit read
// it: nil when absent) can hold a live file, so that a put of its
// directory as a file must Query it (clashChecks). Every commit that
// gives a partition a file, staged or not, sets its head's seq in the same
// transaction, and nothing lake does clears seq while a file is left:
// DropPartition deletes the head in its last transaction, after the
// files, conditioned on the seq it read first, and a guard bump on a
// dropped model's head leaves a stub without seq. So a head without seq
// vouches for an empty model (no Query: issue 31, the first sync of many
// files each at a path that could be a deeper model's directory), and the
// ConditionCheck or guard update of that head the put carries in its
// transaction (guard) keeps it so until the commit: a commit of the model
// in between sets seq and fails this one, which reads again and Queries.
// A file item written without its head (not lake's protocol: a foreign
// writer) is not seen here; `lake data check --repair` rebuilds the head
// of a partition holding files, and the put Queries from then on.
func mayHoldFiles(h item) bool { return getN(h, "seq") != 0 }

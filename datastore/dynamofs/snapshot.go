package dynamofs

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Reads that other reads rely on. A commit's head CAS vouches for what the
// commit read of the partition (its files, the directories above a put,
// the Queries below it), and a shard counter for the index entries up to
// it; that holds only if those reads see every transaction the head or
// counter read already reflects. A BatchGetItem does not promise it: it is
// not serializable with TransactWriteItems as a whole (DynamoDB's isolation
// levels), and DynamoDB Local shows a commit's new head beside its old
// file items in the same response (TestSnapshotReadIsWhole). That let two
// racing writers both land a file and a file below it (issue 27's race).
//
// snapshotRead reads with TransactGetItems, which is serializable with
// every transaction: up to 100 keys it is one request and one snapshot;
// past that the vouching keys are read that way first and the rest after
// them with BatchGetItem, so that each of those sees at least every
// transaction the vouching keys reflect, and a later one moves a head or
// counter the reader conditions on. The cost: as many requests as
// BatchGetItem, twice its read capacity for the keys read transactionally.
//
// ChangedPartitions needs no snapshot (feed.go): a counter read alone is
// serializable, and the Queries it vouches for come after it.

// maxSnapshotKeys is TransactGetItems' limit of keys per request.
const maxSnapshotKeys = 100

// snapshotRead returns the items present among vouch and rest (no key
// twice): vouch read serializably, rest no earlier than vouch.
func (d *Driver) snapshotRead(ctx context.Context, vouch, rest []item) ([]item, error) {
	vouch = dedupKeys(vouch)
	in := map[string]bool{}
	for _, k := range vouch {
		in[itemID(k)] = true
	}
	var later []item
	for _, k := range dedupKeys(rest) {
		if !in[itemID(k)] {
			later = append(later, k)
		}
	}
	if len(vouch)+len(later) == 0 {
		return nil, nil
	}
	if len(vouch)+len(later) <= maxSnapshotKeys {
		got, err := d.transactGet(ctx, append(vouch, later...))
		var ae smithy.APIError
		if err == nil || !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" || len(later) == 0 {
			return got, err
		}
		// Past TransactGetItems' 4 MB of items: the vouching keys
		// alone first, as below.
		got, err = d.transactGet(ctx, vouch)
		if err != nil {
			return nil, err
		}
		more, err := d.batchGet(ctx, later)
		return append(got, more...), err
	}
	// The vouching keys 100 to a TransactGetItems, the last one filled
	// up with the first of the rest (read in the same snapshot: no
	// earlier), then the rest 100 to a BatchGetItem: as many requests as
	// BatchGetItem alone would make.
	var found []item
	for start := 0; start < len(vouch); start += maxSnapshotKeys {
		chunk := vouch[start:min(start+maxSnapshotKeys, len(vouch))]
		if n := maxSnapshotKeys - len(chunk); n > 0 {
			n = min(n, len(later))
			chunk, later = append(chunk[:len(chunk):len(chunk)], later[:n]...), later[n:]
		}
		got, err := d.transactGet(ctx, chunk)
		if err != nil {
			return nil, err
		}
		found = append(found, got...)
	}
	got, err := d.batchGet(ctx, later)
	if err != nil {
		return nil, err
	}
	return append(found, got...), nil
}

// transactGet reads at most 100 distinct keys in one TransactGetItems; a
// read refused for a transaction in flight on one of them
// (TransactionConflict) is retried with the retryer's backoff.
func (d *Driver) transactGet(ctx context.Context, keys []item) ([]item, error) {
	gets := make([]types.TransactGetItem, len(keys))
	for i, k := range keys {
		gets[i] = types.TransactGetItem{Get: &types.Get{TableName: &d.table, Key: k}}
	}
	var out *dynamodb.TransactGetItemsOutput
	err := d.retry(ctx, func() error {
		var err error
		out, err = d.api.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{TransactItems: gets, ReturnConsumedCapacity: total})
		return err
	})
	if err != nil {
		return nil, d.classify(err, "")
	}
	var found []item
	for _, r := range out.Responses {
		if r.Item != nil {
			found = append(found, r.Item)
		}
	}
	d.meter.add("TransactGetItems", int32(len(found)), out.ConsumedCapacity...)
	return found, nil
}

// vouches reports whether k is a key other reads rely on: a partition's
// head or a shard's counter.
// splitVouching returns keys split into those that vouch for the rest
// (vouches) and the rest, in their order: snapshotRead's two arguments.
func (d *Driver) splitVouching(keys []item) (vouch, rest []item) {
	for _, k := range keys {
		if d.vouches(k) {
			vouch = append(vouch, k)
		} else {
			rest = append(rest, k)
		}
	}
	return vouch, rest
}

func (d *Driver) vouches(k item) bool {
	pk := getS(k, attrPK)
	return strings.HasPrefix(pk, d.pk("x#")) || strings.HasPrefix(pk, d.pk("n#"))
}

// ReadsWhole reports which reads of several paths are snapshots (the
// conformance suite's StatSeesCommitWhole and ListSeesCommitWhole): a Stat
// of up to 100 paths is one TransactGetItems; a listing page is one Query,
// which DynamoDB documents as read-committed, not serializable with a
// transaction, so lake does not promise it whole.
func (d *Driver) ReadsWhole(kind string) bool { return kind == "stat" }

package dynamofs

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/ddb"
	"golang.org/x/sync/errgroup"
)

type item = map[string]types.AttributeValue

var total = types.ReturnConsumedCapacityTotal

func (d *Driver) getItem(ctx context.Context, k item) (item, error) {
	var out *dynamodb.GetItemOutput
	err := d.retry(ctx, func() error {
		var err error
		out, err = d.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &d.table, Key: k, ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: total})
		return err
	})
	if err != nil {
		return nil, d.classify(err, "")
	}
	n := int32(0)
	if out.Item != nil {
		n = 1
	}
	d.meter.add("GetItem", n, one(out.ConsumedCapacity)...)
	return out.Item, nil
}

func (d *Driver) putItem(ctx context.Context, in *dynamodb.PutItemInput) error {
	if err := d.fault.Check(); err != nil { // whole.go
		return err
	}
	in.TableName, in.ReturnConsumedCapacity = &d.table, total
	err := d.retry(ctx, func() error {
		out, err := d.api.PutItem(ctx, in)
		if err == nil {
			d.meter.add("PutItem", 0, one(out.ConsumedCapacity)...)
			d.meter.count(&d.meter.s.ItemsWritten)
		}
		return err
	})
	return err
}

// query runs one Query page, strongly consistent.
func (d *Driver) query(ctx context.Context, in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
	in.TableName, in.ConsistentRead, in.ReturnConsumedCapacity = &d.table, aws.Bool(true), total
	var out *dynamodb.QueryOutput
	err := d.retry(ctx, func() error {
		var err error
		out, err = d.api.Query(ctx, in)
		return err
	})
	if err != nil {
		return nil, d.classify(err, "")
	}
	d.meter.add("Query", out.ScannedCount, one(out.ConsumedCapacity)...)
	return out, nil
}

// batchGetSize is BatchGetItem's limit of keys per request.
const batchGetSize = 100

// batchGet reads keys strongly consistently, 100 to a request; unprocessed
// keys are retried with the retryer's backoff.
func (d *Driver) batchGet(ctx context.Context, keys []item) ([]item, error) {
	if len(keys) <= batchGetSize {
		return d.batchGetPage(ctx, keys)
	}
	// Pages of batchGetSize keys, read in parallel: a BatchGetItem is no
	// snapshot of its keys either, so pages read one after another
	// promised nothing more than pages read at once.
	pages := make([][]item, (len(keys)+batchGetSize-1)/batchGetSize)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(batchGetParallel)
	for i := range pages {
		g.Go(func() error {
			var err error
			pages[i], err = d.batchGetPage(gctx, keys[i*batchGetSize:min((i+1)*batchGetSize, len(keys))])
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return slices.Concat(pages...), nil
}

// batchGetParallel bounds the BatchGetItem pages of one read in flight.
const batchGetParallel = 8

// batchGetPage reads at most batchGetSize keys, the unprocessed ones again
// with backoff.
func (d *Driver) batchGetPage(ctx context.Context, pending []item) ([]item, error) {
	var found []item
	for attempt := 1; len(pending) > 0; attempt++ {
		var out *dynamodb.BatchGetItemOutput
		err := d.retry(ctx, func() error {
			var err error
			out, err = d.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
				RequestItems:           map[string]types.KeysAndAttributes{d.table: {Keys: pending, ConsistentRead: aws.Bool(true)}},
				ReturnConsumedCapacity: total,
			})
			return err
		})
		if err != nil {
			return nil, d.classify(err, "")
		}
		got := out.Responses[d.table]
		d.meter.add("BatchGetItem", int32(len(got)), out.ConsumedCapacity...)
		found = append(found, got...)
		pending = out.UnprocessedKeys[d.table].Keys
		if len(pending) > 0 {
			if attempt >= d.retryer.MaxAttempts() {
				return nil, fmt.Errorf("lake: %d keys stayed unprocessed after %d BatchGetItem attempts", len(pending), attempt)
			}
			delay, _ := d.retryer.RetryDelay(attempt, fmt.Errorf("unprocessed keys"))
			sleep(ctx, delay)
		}
	}
	return found, nil
}

// batchDelete deletes keys unconditionally, 25 to a request, retrying
// unprocessed items with backoff.
func (d *Driver) batchDelete(ctx context.Context, keys []item) error {
	if err := d.fault.Check(); err != nil { // whole.go
		return err
	}
	for start := 0; start < len(keys); start += 25 {
		var reqs []types.WriteRequest
		for _, k := range keys[start:min(start+25, len(keys))] {
			reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}})
		}
		for attempt := 1; len(reqs) > 0; attempt++ {
			var out *dynamodb.BatchWriteItemOutput
			err := d.retry(ctx, func() error {
				var err error
				out, err = d.api.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
					RequestItems: map[string][]types.WriteRequest{d.table: reqs}, ReturnConsumedCapacity: total})
				return err
			})
			if err != nil {
				return d.classify(err, "")
			}
			d.meter.add("BatchWriteItem", 0, out.ConsumedCapacity...)
			d.meter.countN(&d.meter.s.ItemsWritten, len(reqs)-len(out.UnprocessedItems[d.table]))
			reqs = out.UnprocessedItems[d.table]
			if len(reqs) > 0 {
				if attempt >= d.retryer.MaxAttempts() {
					return fmt.Errorf("lake: %d deletes stayed unprocessed after %d attempts", len(reqs), attempt)
				}
				delay, _ := d.retryer.RetryDelay(attempt, fmt.Errorf("unprocessed items"))
				sleep(ctx, delay)
			}
		}
	}
	return nil
}

// transact sends one transaction under one idempotency token, reused by every
// retry, so that a retry after a lost response cannot apply it twice.
func (d *Driver) transact(ctx context.Context, items []types.TransactWriteItem) error {
	if err := d.fault.Check(); err != nil { // whole.go
		return err
	}
	token := ddb.NewToken()
	attempts := 0
	return d.retry(ctx, func() error {
		if attempts++; attempts > 1 {
			d.meter.count(&d.meter.s.TransactRetries)
		}
		out, err := d.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: items, ClientRequestToken: &token, ReturnConsumedCapacity: total})
		if err == nil {
			d.meter.add("TransactWriteItems", 0, out.ConsumedCapacity...)
			d.meter.countN(&d.meter.s.ItemsWritten, len(items))
		}
		return err
	})
}

func getS(it item, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(it item, name string) uint64 {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseUint(v.Value, 10, 64)
		return n
	}
	return 0
}

func getI(it item, name string) int64 {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

func getB(it item, name string) []byte {
	if v, ok := it[name].(*types.AttributeValueMemberB); ok {
		return v.Value
	}
	return nil
}

func getBool(it item, name string) bool {
	v, ok := it[name].(*types.AttributeValueMemberBOOL)
	return ok && v.Value
}

// fileItem encodes a path's state. NB: attribute names are the table format.
func (d *Driver) fileItem(info datastore.Info) item {
	it := key(d.filePK(info.Partition), info.Path)
	it[attrPos] = num(info.Pos)
	it["t"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(info.Time.UnixNano(), 10)}
	if info.Deleted {
		it["del"] = &types.AttributeValueMemberBOOL{Value: true}
		return it
	}
	it["ver"] = str(info.Version)
	it["size"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(info.Size, 10)}
	it["chunks"] = num(uint64(info.Chunks))
	it["sha"] = str(info.SHA256)
	it["meta"] = &types.AttributeValueMemberB{Value: info.Meta}
	if len(info.Inline) > 0 {
		// An inline file's content (Chunks 0): absent for a file in
		// chunks, an empty file, and every item written before inline
		// storage existed.
		it["inl"] = &types.AttributeValueMemberB{Value: info.Inline}
	}
	return it
}

func fileInfo(it item) datastore.Info {
	path := getS(it, attrSK)
	meta := getB(it, "meta")
	if meta == nil && !getBool(it, "del") {
		meta = []byte{}
	}
	return datastore.Info{Path: path, Partition: itemPartition(it, path), Pos: getN(it, attrPos), Deleted: getBool(it, "del"),
		Version: getS(it, "ver"), Size: getI(it, "size"), Chunks: int(getN(it, "chunks")), SHA256: getS(it, "sha"),
		Meta: meta, Inline: getB(it, "inl"), Time: time.Unix(0, getI(it, "t"))}
}

// itemPartition returns the partition a file item is stored in: its pk
// after the namespace's prefix (s#NS#) and f#, so that what a reader
// reports is where the item lives, whatever the layout; path's partition
// under the default layout for an item without one.
func itemPartition(it item, path string) string {
	pk := getS(it, attrPK)
	if rest, ok := strings.CutPrefix(pk, "s#"); ok {
		_, pk, _ = strings.Cut(rest, "#")
	}
	if part, ok := strings.CutPrefix(pk, "f#"); ok && part != "" {
		return part
	}
	return datastore.Partition(path)
}

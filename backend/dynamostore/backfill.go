package dynamostore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
)

// BackfillPageResult is what one backfill page did.
type BackfillPageResult struct {
	Scanned, Created, Validated, Repaired int64
	// Removed counts v2 copies of keys v1 no longer has, deleted.
	Removed int64
	// Next is the scan position after this page; empty when v1 is done.
	Next string
}

// backfillWorkers bounds the items of a page converged at once.
const backfillWorkers = 8

// BackfillPage scans one page of at most limit v1 items (strongly
// consistent) after position from, and makes v2 converge to v1 for each of
// them: created if absent, validated if equal, repaired (v2 := v1, in a
// transaction that checks both current values exactly) if different, and a
// v2 copy of a key v1 no longer has is removed. It returns only when every
// item of the page converged; replaying a page is idempotent.
func (p Primitives) BackfillPage(ctx context.Context, from string, limit int) (BackfillPageResult, error) {
	d := p.d
	in := &dynamodb.ScanInput{
		TableName: aws.String(d.v1), Limit: aws.Int32(int32(limit)), ConsistentRead: aws.Bool(true),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}
	if from != "" {
		in.ExclusiveStartKey = map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: from}}
	}
	var out *dynamodb.ScanOutput
	err := d.retry(ctx, func(int) error {
		var err error
		out, err = d.api.Scan(ctx, in)
		return err
	})
	if err != nil {
		return BackfillPageResult{}, d.classify(err, d.v1)
	}
	d.meter.request("Scan", out.ScannedCount, out.Count, ccOf(out.ConsumedCapacity)...)
	var res BackfillPageResult
	var user []metastore.Item
	families := map[string]bool{}
	for _, it := range out.Items {
		pk, _ := it[attrPK].(*types.AttributeValueMemberS)
		if pk == nil || metastore.IsControlKey(pk.Value) {
			continue
		}
		user = append(user, metastore.Item{Key: pk.Value, Value: valueOf(it)})
		families[metastore.Family(pk.Value)] = true
	}
	for _, f := range slices.Sorted(maps.Keys(families)) {
		if err := d.registerFamilyNow(ctx, f); err != nil {
			return res, err
		}
	}
	res.Scanned = int64(len(user))
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, backfillWorkers)
	var wg sync.WaitGroup
	count := func(o outcome, n int64) {
		switch o {
		case outcomeCreated:
			res.Created += n
		case outcomeValidated:
			res.Validated += n
		case outcomeRepaired:
			res.Repaired += n
		case outcomeRemoved:
			res.Removed += n
		}
	}
	for _, batch := range createBatches(user) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			// The common case, v2 has none of the batch's keys, is one
			// transaction for the whole batch; any failed condition sends
			// every key of it through its own convergence.
			err := d.createAll(ctx, batch)
			if err == nil {
				mu.Lock()
				count(outcomeCreated, int64(len(batch)))
				mu.Unlock()
				return
			}
			if !errors.Is(err, metastore.ErrConflict) && !errors.Is(err, ErrDiverged) {
				mu.Lock()
				firstErr = cmp.Or(firstErr, err)
				mu.Unlock()
				return
			}
			for _, it := range batch {
				outcome, err := d.converge(ctx, it.Key, it.Value)
				mu.Lock()
				if err != nil {
					firstErr = cmp.Or(firstErr, err)
				} else {
					count(outcome, 1)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return BackfillPageResult{}, firstErr
	}
	if lek, ok := out.LastEvaluatedKey[attrPK].(*types.AttributeValueMemberS); ok {
		res.Next = lek.Value
	}
	return res, nil
}

// Batch bounds: DynamoDB allows 100 items and 4 MB per transaction, and
// each key takes two items (the v1 check and the v2 put).
const (
	maxBatchKeys  = 25
	maxBatchBytes = 2 << 20
)

// createBatches groups items for createAll.
func createBatches(items []metastore.Item) [][]metastore.Item {
	var out [][]metastore.Item
	var cur []metastore.Item
	size := 0
	for _, it := range items {
		n := 2*len(it.Key) + len(it.Value) + 64
		if len(cur) == maxBatchKeys || len(cur) > 0 && size+n > maxBatchBytes {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, it)
		size += n
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// createAll creates v2 copies of items in one transaction, each
// conditioned on v1 still holding the scanned value and v2 having none.
func (d *Driver) createAll(ctx context.Context, items []metastore.Item) error {
	tx := make([]txItem, 0, 2*len(items))
	for _, it := range items {
		tx = append(tx,
			txItem{t: tV1, key: it.Key, kind: kCheck, role: roleTarget, cond: condEquals(it.Value)},
			txItem{t: tV2, key: it.Key, kind: kPut, value: it.Value, cond: condAbsent(), role: roleCopy})
	}
	return d.transact(ctx, tx)
}

type outcome int

const (
	outcomeValidated outcome = iota
	outcomeCreated
	outcomeRepaired
	outcomeRemoved
)

// maxConverge bounds the rounds of one key's convergence under concurrent
// writes.
const maxConverge = 32

// converge makes v2's copy of key equal v1's. With scanned set, the first
// round trusts the scanned v1 value and assumes v2 has no copy; otherwise,
// and after every failed condition, it reads both copies atomically and
// decides again. Every write is conditioned on both copies as read: v1 is
// never written (it is the authority, so a concurrent dual write, which
// changes both, is never overwritten), and a v2 copy whose key v1 lacks is
// deleted only while v1 still lacks it.
func (d *Driver) converge(ctx context.Context, key string, scanned []byte) (outcome, error) {
	v1, v1ok := scanned, scanned != nil
	var v2 []byte
	v2ok := false // the first round assumes v2 absent
	for round := 0; round < maxConverge; round++ {
		if round > 0 || scanned == nil {
			var err error
			if v1, v1ok, v2, v2ok, err = d.readBoth(ctx, key); err != nil {
				return 0, err
			}
		}
		var items []txItem
		result := outcomeRepaired
		v1check := txItem{t: tV1, key: key, kind: kCheck, role: roleTarget, cond: condEquals(v1)}
		if !v1ok {
			v1check.cond = condAbsent()
		}
		switch {
		case !v1ok && !v2ok:
			return outcomeValidated, nil
		case v1ok && v2ok && string(v1) == string(v2):
			return outcomeValidated, nil
		case v1ok && !v2ok:
			result = outcomeCreated
			items = []txItem{v1check, {t: tV2, key: key, kind: kPut, value: v1, cond: condAbsent(), role: roleCopy}}
		case v1ok && v2ok:
			items = []txItem{v1check, {t: tV2, key: key, kind: kPut, value: v1, cond: condEquals(v2), role: roleCopy}}
		default: // v1 gone, v2 left behind
			result = outcomeRemoved
			items = []txItem{v1check, {t: tV2, key: key, kind: kDelete, cond: condEquals(v2), role: roleCopy}}
		}
		err := d.transact(ctx, items)
		switch {
		case err == nil:
			return result, nil
		case errors.Is(err, metastore.ErrConflict), errors.Is(err, ErrDiverged):
			continue // someone wrote in between: look again
		default:
			return 0, err
		}
	}
	return 0, fmt.Errorf("%w: key %q kept changing during backfill", metastore.ErrUnavailable, key)
}

// readBoth reads v1's and v2's copies of key at one instant
// (TransactGetItems).
func (d *Driver) readBoth(ctx context.Context, key string) (v1 []byte, v1ok bool, v2 []byte, v2ok bool, err error) {
	var out *dynamodb.TransactGetItemsOutput
	proj := aws.String(attrPK + "," + attrValue + "," + attrWrite)
	err = d.retry(ctx, func(int) error {
		var err error
		out, err = d.api.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{
			TransactItems: []types.TransactGetItem{
				{Get: &types.Get{TableName: aws.String(d.v1), Key: d.keyIn(tV1, key), ProjectionExpression: proj}},
				{Get: &types.Get{TableName: aws.String(d.v2), Key: d.keyIn(tV2, key), ProjectionExpression: proj}},
			},
			ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		})
		return err
	})
	if err != nil {
		return nil, false, nil, false, d.classify(err, d.v1, key)
	}
	d.meter.request("TransactGetItems", 2, 2, out.ConsumedCapacity...)
	r1, r2 := out.Responses[0].Item, out.Responses[1].Item
	return valueOf(r1), r1 != nil, valueOf(r2), r2 != nil, nil
}

// registerFamilyNow registers family in the v2 registry whatever the cached
// state (the backfill copies families written before dual).
func (d *Driver) registerFamilyNow(ctx context.Context, family string) error {
	if family == metastore.RootFamily {
		return nil
	}
	if _, ok := d.registered.Load(family); ok {
		return nil
	}
	return d.addFamily(ctx, family)
}

// ReadBoth reads v1's and v2's copies of key at one instant
// (TransactGetItems).
func (p Primitives) ReadBoth(ctx context.Context, key string) (v1 []byte, v1ok bool, v2 []byte, v2ok bool, err error) {
	return p.d.readBoth(ctx, key)
}

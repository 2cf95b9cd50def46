package dynamostore

import (
	"bytes"
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
	"github.com/lakemeta/lake/sweep"
)

// BackfillPageResult is what one backfill page did.
type BackfillPageResult struct {
	Scanned, Created, Validated, Repaired int64
	// Removed counts v2 copies of keys v1 no longer has, deleted.
	Removed int64
	// Next is the scan position after this page; empty when v1 is done.
	Next string
}

// backfillWorkers bounds the transactions of one page in flight at once.
const backfillWorkers = 8

// BackfillHandler returns the handler of the backfill's sweep over v1
// (package sweep): for each page it makes v2 converge to v1, key by key:
// created if absent, validated if equal, repaired (v2 := v1, in a
// transaction that checks both current values exactly) if different. Every
// create is conditioned on v1 still holding the scanned value and v2 having
// no copy; nothing writes v2 unconditionally. It returns only when every
// item of the page converged, so that the sweep saves the page's cursor
// after it; replaying a page is idempotent. It reports the write units it
// causes through Page.Spend, and counts "scanned", "created", "validated"
// and "repaired". In a dry run it writes nothing: it reads the v2 copies and
// counts what it would do ("would-create", "would-repair", "validated").
func (p Primitives) BackfillHandler() sweep.Handler {
	return p.d.backfillPage
}

func (d *Driver) backfillPage(ctx context.Context, pg *sweep.Page) error {
	var user []metastore.Item
	families := map[string]bool{}
	for _, it := range pg.Items {
		pk, _ := it[attrPK].(*types.AttributeValueMemberS)
		if pk == nil || metastore.IsControlKey(pk.Value) {
			continue
		}
		user = append(user, metastore.Item{Key: pk.Value, Value: valueOf(it)})
		families[metastore.Family(pk.Value)] = true
	}
	pg.Count("scanned", int64(len(user)))
	if pg.DryRun {
		return d.backfillDryRun(ctx, pg, user)
	}
	for _, f := range slices.Sorted(maps.Keys(families)) {
		if err := d.registerFamilyNow(ctx, f); err != nil {
			return err
		}
	}
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		firstErr = cmp.Or(firstErr, err)
		mu.Unlock()
	}
	sem := make(chan struct{}, backfillWorkers)
	var wg sync.WaitGroup
	for _, batch := range createBatches(user) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			// The common case, v2 has none of the batch's keys, is one
			// transaction for the whole batch; any failed condition sends
			// every key of it through its own convergence.
			estimate := createUnits(batch)
			if err := pg.Spend(ctx, estimate); err != nil {
				fail(err)
				return
			}
			used, err := d.createAll(ctx, batch)
			if used > 0 {
				if err := pg.Spend(ctx, used-estimate); err != nil {
					fail(err)
					return
				}
			}
			if err == nil {
				pg.Count("created", int64(len(batch)))
				return
			}
			if !errors.Is(err, metastore.ErrConflict) && !errors.Is(err, ErrDiverged) {
				fail(err)
				return
			}
			for _, it := range batch {
				if err := pg.Spend(ctx, createUnits([]metastore.Item{it})); err != nil {
					fail(err)
					return
				}
				o, err := d.converge(ctx, it.Key, it.Value)
				if err != nil {
					fail(err)
					return
				}
				pg.Count(o.String(), 1)
			}
		})
	}
	wg.Wait()
	return firstErr
}

// backfillDryRun counts what backfillPage would do with user, from the v2
// copies as they are now.
func (d *Driver) backfillDryRun(ctx context.Context, pg *sweep.Page, user []metastore.Item) error {
	keys := make([]string, len(user))
	for i, it := range user {
		keys[i] = it.Key
	}
	copies, err := d.batchGet(ctx, tV2, keys)
	if err != nil {
		return err
	}
	for _, it := range user {
		c, ok := copies[it.Key]
		switch {
		case !ok:
			pg.Count("would-create", 1)
		case bytes.Equal(valueOf(c), it.Value):
			pg.Count("validated", 1)
		default:
			pg.Count("would-repair", 1)
		}
	}
	return nil
}

// createUnits estimates the write units of createAll(items): a transaction
// costs two units per KB of each item, the v1 check as much as the v2 put.
func createUnits(items []metastore.Item) float64 {
	units := 0.0
	for _, it := range items {
		kb := (2*len(it.Key) + len(it.Value) + 64 + 1023) / 1024
		units += 4 * float64(kb)
	}
	return units
}

// Batch bounds: DynamoDB allows 100 items and 4 MB per transaction, and
// each key takes two items (the v1 check and the v2 put).
const (
	maxBatchKeys  = 50
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
// conditioned on v1 still holding the scanned value and v2 having none. It
// returns the write units DynamoDB reported.
func (d *Driver) createAll(ctx context.Context, items []metastore.Item) (float64, error) {
	tx := make([]txItem, 0, 2*len(items))
	for _, it := range items {
		tx = append(tx,
			txItem{t: tV1, key: it.Key, kind: kCheck, role: roleTarget, cond: condEquals(it.Value)},
			txItem{t: tV2, key: it.Key, kind: kPut, value: it.Value, cond: condAbsent(), role: roleCopy})
	}
	return d.transactUnits(ctx, tx)
}

type outcome int

const (
	outcomeValidated outcome = iota
	outcomeCreated
	outcomeRepaired
	outcomeRemoved
)

// String names the outcome as the backfill counts it.
func (o outcome) String() string {
	switch o {
	case outcomeCreated:
		return "created"
	case outcomeRepaired:
		return "repaired"
	case outcomeRemoved:
		return "removed"
	}
	return "validated"
}

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

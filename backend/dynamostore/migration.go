package dynamostore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
)

// This file holds the primitives package migrate builds the migration on.
// They live here because they compose the store's transactions; the order
// and the gates between them are migrate's.

// MigrationSnapshot is the migration record as read, with the exact bytes a
// transition is guarded on.
type MigrationSnapshot struct {
	Migration
	// HasV1 and HasV2 tell which tables exist.
	HasV1, HasV2 bool
	raw1, raw2   []byte
}

// ReadMigration reads the migration record afresh.
func (d *Driver) ReadMigration(ctx context.Context) (MigrationSnapshot, error) {
	s, err := d.state(ctx, true)
	if err != nil {
		return MigrationSnapshot{}, err
	}
	return MigrationSnapshot{Migration: s.m, HasV1: s.hasV1, HasV2: s.hasV2, raw1: s.raw1, raw2: s.raw2}, nil
}

// CreateV2 creates the v2 table (if needed) with this process's layout
// parameters, for a migration entering dual.
func (d *Driver) CreateV2(ctx context.Context) error {
	if err := Create(ctx, d.api, Options{Table: d.v1, Layout: LayoutV2, Retryer: d.retryer, Params: &d.params, Refresh: d.refresh}); err != nil {
		return err
	}
	return d.enableTTL(ctx)
}

// Barriers says what a transition does with the write barrier.
type Barriers int

// The barrier actions of a transition.
const (
	BarriersKeep    Barriers = iota // leave them as they are
	BarriersInstall                 // put every barrier item; each must be absent
	BarriersHeld                    // check every barrier item is present
	BarriersRemove                  // delete every barrier item
)

// Transition replaces the migration record from (exactly as read) with to,
// in one transaction, together with the barrier action; the v2 copy (the
// marker) is written when to reads v2 or a copy exists, and must be absent
// before the marker is first published. It fails with an error matching
// ErrConflict if either record changed since from was read.
func (d *Driver) Transition(ctx context.Context, from MigrationSnapshot, to Migration, barriers Barriers) error {
	raw := to.Marshal()
	var items []txItem
	guard := func(old []byte) *expression.ConditionBuilder {
		if old == nil {
			return condAbsent()
		}
		return condEquals(old)
	}
	if from.HasV1 {
		items = append(items, txItem{t: tV1, key: migrationKey, kind: kPut, value: raw, cond: guard(from.raw1), role: roleState})
	}
	if to.ReadsV2() || from.raw2 != nil {
		items = append(items, txItem{t: tV2, key: migrationKey, kind: kPut, value: raw, cond: guard(from.raw2), role: roleState})
	} else if from.HasV2 {
		// Before the marker is published it must stay unpublished: a
		// transition racing a finalization fails here.
		items = append(items, txItem{t: tV2, key: migrationKey, kind: kCheck, cond: condAbsent(), role: roleState})
	}
	n := to.Barriers
	if n == 0 {
		n = from.Barriers
	}
	if barriers != BarriersKeep && (n <= 0 || n > maxBarriers) {
		return fmt.Errorf("lake: barrier count %d is outside 1..%d", n, maxBarriers)
	}
	for i := range n {
		switch barriers {
		case BarriersInstall:
			items = append(items, txItem{t: tV2, key: BarrierKey(i), kind: kPut, value: []byte("held"), cond: condAbsent(), role: roleState})
		case BarriersHeld:
			items = append(items, txItem{t: tV2, key: BarrierKey(i), kind: kCheck, cond: condPresent(), role: roleState})
		case BarriersRemove:
			items = append(items, txItem{t: tV2, key: BarrierKey(i), kind: kDelete, role: roleMirror})
		}
	}
	err := d.transact(ctx, items)
	d.mu.Lock()
	d.snap.fetched = time.Time{} // re-read on next use
	d.mu.Unlock()
	return err
}

// BackfillPageResult is what one backfill page did.
type BackfillPageResult struct {
	Scanned, Created, Validated, Repaired int64
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
func (d *Driver) BackfillPage(ctx context.Context, from string, limit int) (BackfillPageResult, error) {
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
)

// maxConverge bounds the rounds of one key's convergence under concurrent
// writes.
const maxConverge = 32

// converge makes v2's copy of key equal v1's. The first round trusts the
// scanned value; after a failed condition it reads both copies atomically
// and decides again. v1 is never written: it is the authority, so a
// concurrent dual write (which changes both) is never overwritten.
func (d *Driver) converge(ctx context.Context, key string, scanned []byte) (outcome, error) {
	v1, v1ok := scanned, true
	var v2 []byte
	v2ok := false // the first round assumes v2 absent
	for round := 0; round < maxConverge; round++ {
		if round > 0 {
			var err error
			if v1, v1ok, v2, v2ok, err = d.ReadBoth(ctx, key); err != nil {
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

// ReadBoth reads v1's and v2's copies of key at one instant
// (TransactGetItems).
func (d *Driver) ReadBoth(ctx context.Context, key string) (v1 []byte, v1ok bool, v2 []byte, v2ok bool, err error) {
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

// NodeInfo is one node's entry in the node registry.
type NodeInfo struct {
	ID string `json:"id"`
	// Role is "commit" for a node that writes metadata, "reader" otherwise.
	Role string `json:"role"`
	// Capability is "dual" for binaries that can dual-write, "v1" for
	// binaries that cannot.
	Capability string `json:"capability"`
	// Layout is the layout the node's store was opened with.
	Layout Layout `json:"layout"`
	// State and Epoch are the migration state the node last observed.
	State State `json:"state"`
	Epoch int64 `json:"epoch"`
	// Heartbeat is the node's last heartbeat; the node is live until
	// Heartbeat + Lease.
	Heartbeat time.Time     `json:"heartbeat"`
	Lease     time.Duration `json:"lease"`
}

// Live reports whether the node's lease covers now.
func (n NodeInfo) Live(now time.Time) bool { return now.Before(n.Heartbeat.Add(n.Lease)) }

// V1Only reports whether a live commit-capable node does not dual-write.
func (n NodeInfo) V1Only() bool {
	return n.Role == "commit" && (n.Capability != "dual" || n.Layout == LayoutV1 || n.State == StateV1)
}

const registryKey = metastore.ControlPrefix + "nodes"

// registryTable is where the node registry lives: v1 while it exists.
func (d *Driver) registryTable(ctx context.Context) (tbl, error) {
	snap, err := d.state(ctx, false)
	if err != nil {
		return tV1, err
	}
	if snap.hasV1 {
		return tV1, nil
	}
	return tV2, nil
}

// Heartbeat writes n (with this store's observed state) into the node
// registry, one attribute of one registry item per node, so that nodes never
// overwrite each other. The state n reports is the one the store itself
// routes by.
func (d *Driver) Heartbeat(ctx context.Context, n NodeInfo) (NodeInfo, error) {
	snap, err := d.state(ctx, false)
	if err != nil {
		return n, err
	}
	n.State, n.Epoch, n.Layout, n.Heartbeat = snap.m.State, snap.m.Epoch, d.layout, time.Now().UTC()
	if n.Capability == "" {
		n.Capability = "dual"
	}
	b, err := json.Marshal(n)
	if err != nil {
		return n, err
	}
	t, err := d.registryTable(ctx)
	if err != nil {
		return n, err
	}
	upd := expression.Set(expression.Name("nodes."+n.ID), expression.Value(string(b)))
	return n, d.updateRegistry(ctx, t, upd)
}

// Deregister removes node id from the registry.
func (d *Driver) Deregister(ctx context.Context, id string) error {
	t, err := d.registryTable(ctx)
	if err != nil {
		return err
	}
	return d.updateRegistry(ctx, t, expression.Remove(expression.Name("nodes."+id)))
}

func (d *Driver) updateRegistry(ctx context.Context, t tbl, upd expression.UpdateBuilder) error {
	// The map must exist before one of its attributes can be set.
	init, err := expression.NewBuilder().WithUpdate(expression.Set(expression.Name("nodes"),
		expression.IfNotExists(expression.Name("nodes"), expression.Value(map[string]string{})))).Build()
	if err != nil {
		return err
	}
	e, err := expression.NewBuilder().WithUpdate(upd).Build()
	if err != nil {
		return err
	}
	for _, x := range []expression.Expression{init, e} {
		err = d.retry(ctx, func(int) error {
			d.meter.control()
			_, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(d.tableName(t)), Key: d.keyIn(t, registryKey),
				UpdateExpression: x.Update(), ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
			})
			return err
		})
		if err != nil {
			return d.classify(err, d.tableName(t))
		}
	}
	return nil
}

// Nodes returns every node in the registry, live or not.
func (d *Driver) Nodes(ctx context.Context) ([]NodeInfo, error) {
	t, err := d.registryTable(ctx)
	if err != nil {
		return nil, err
	}
	item, _, err := d.getControl(ctx, d.tableName(t), registryKey)
	if err != nil {
		return nil, err
	}
	m, _ := item["nodes"].(*types.AttributeValueMemberM)
	if m == nil {
		return nil, nil
	}
	var out []NodeInfo
	for _, id := range slices.Sorted(maps.Keys(m.Value)) {
		s, _ := m.Value[id].(*types.AttributeValueMemberS)
		if s == nil {
			continue
		}
		var n NodeInfo
		if err := json.Unmarshal([]byte(s.Value), &n); err != nil {
			return nil, fmt.Errorf("lake: registry entry %q: %w", id, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// DeleteV1Table deletes the legacy table (retirement, when asked for).
func (d *Driver) DeleteV1Table(ctx context.Context) error {
	_, err := d.api.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(d.v1)})
	return d.classify(err, d.v1)
}

// StartHeartbeat heartbeats n into the node registry now and then every
// interval, until stop is called, which deregisters the node. A node that
// is killed stops counting as live when its lease (default three
// intervals) lapses; liveness is never left to TTL deletion. onErr, if set,
// receives heartbeat failures (the next beat retries).
func (d *Driver) StartHeartbeat(ctx context.Context, n NodeInfo, interval time.Duration, onErr func(error)) (stop func(context.Context) error, err error) {
	if n.ID == "" || interval <= 0 {
		return nil, fmt.Errorf("%w: a heartbeat needs a node id and a positive interval", metastore.ErrInvalidArgument)
	}
	if n.Lease <= 0 {
		n.Lease = 3 * interval
	}
	if n.Lease < 2*interval {
		return nil, fmt.Errorf("%w: lease %v must be at least twice the heartbeat interval %v", metastore.ErrInvalidArgument, n.Lease, interval)
	}
	if _, err := d.Heartbeat(ctx, n); err != nil {
		return nil, err
	}
	hbCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-t.C:
				if _, err := d.Heartbeat(hbCtx, n); err != nil && onErr != nil && hbCtx.Err() == nil {
					onErr(err)
				}
			}
		}
	}()
	return func(ctx context.Context) error {
		cancel()
		<-done
		return d.Deregister(ctx, n.ID)
	}, nil
}

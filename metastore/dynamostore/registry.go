package dynamostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
)

// Registry is the node registry's handle on a store: long-running
// processes heartbeat into it and the migrator reads it to gate its steps.
// Get one with Driver.Registry.
type Registry struct{ d *Driver }

// Registry returns the node registry of d's table.
func (d *Driver) Registry() Registry { return Registry{d} }

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

	raw string // the entry's bytes as read, for a conditional removal
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

// PruneAfterLeases is how long an entry outlives its node: an entry whose
// heartbeat is older than this many of its leases is removed by the next
// heartbeat of any live process that sees it, with a REMOVE conditioned on
// the entry being exactly as seen (a node that came back keeps its entry).
// So the registry's size, and the write units every heartbeat pays for
// the whole item, follow the live fleet, not every pod that ever ran.
const PruneAfterLeases = 10

// pruneBatch bounds the entries one conditional REMOVE drops.
const pruneBatch = 50

// Heartbeat writes n (with this store's observed state) into the node
// registry, one attribute of one registry item per node, so that nodes never
// overwrite each other. The state n reports is the one the store itself
// routes by. Entries dead for PruneAfterLeases leases are pruned on the way.
func (r Registry) Heartbeat(ctx context.Context, n NodeInfo) (NodeInfo, error) {
	ns, err := r.HeartbeatAll(ctx, []NodeInfo{n})
	if err != nil {
		return n, err
	}
	return ns[0], nil
}

// HeartbeatAll is Heartbeat for several nodes at once, in one update of the
// registry item: for a process that reports for several nodes.
func (r Registry) HeartbeatAll(ctx context.Context, ns []NodeInfo) ([]NodeInfo, error) {
	d := r.d
	snap, err := d.state(ctx, false)
	if err != nil {
		return nil, err
	}
	t, err := d.registryTable(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	out := make([]NodeInfo, len(ns))
	var upd expression.UpdateBuilder
	for i, n := range ns {
		if n.ID == "" {
			return nil, fmt.Errorf("%w: a registry entry needs a node id", metastore.ErrInvalidArgument)
		}
		n.State, n.Epoch, n.Layout, n.Heartbeat = snap.m.State, snap.m.Epoch, d.layout, now
		if n.Capability == "" {
			n.Capability = "dual"
		}
		b, err := json.Marshal(n)
		if err != nil {
			return nil, err
		}
		upd = upd.Set(expression.Name("nodes."+n.ID), expression.Value(string(b)))
		out[i] = n
	}
	item, err := d.updateRegistry(ctx, t, upd, nil)
	if err != nil {
		return out, err
	}
	return out, d.pruneRegistry(ctx, t, item, now)
}

// Deregister removes node id from the registry.
func (r Registry) Deregister(ctx context.Context, id string) error {
	d := r.d
	t, err := d.registryTable(ctx)
	if err != nil {
		return err
	}
	_, err = d.updateRegistry(ctx, t, expression.Remove(expression.Name("nodes."+id)), nil)
	return err
}

// updateRegistry applies upd (under cond, if set) to the registry item and
// returns the item as it is after the update.
func (d *Driver) updateRegistry(ctx context.Context, t tbl, upd expression.UpdateBuilder, cond *expression.ConditionBuilder) (map[string]types.AttributeValue, error) {
	// The map must exist before one of its attributes can be set.
	init, err := expression.NewBuilder().WithUpdate(expression.Set(expression.Name("nodes"),
		expression.IfNotExists(expression.Name("nodes"), expression.Value(map[string]string{})))).Build()
	if err != nil {
		return nil, err
	}
	b := expression.NewBuilder().WithUpdate(upd)
	if cond != nil {
		b = b.WithCondition(*cond)
	}
	e, err := b.Build()
	if err != nil {
		return nil, err
	}
	var item map[string]types.AttributeValue
	for i, x := range []expression.Expression{init, e} {
		if i == 0 && cond != nil {
			continue // a conditional update only removes: the map exists
		}
		err = d.retry(ctx, func(int) error {
			d.meter.control()
			out, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(d.tableName(t)), Key: d.keyIn(t, registryKey),
				UpdateExpression: x.Update(), ConditionExpression: x.Condition(),
				ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
				ReturnValues: types.ReturnValueAllNew,
			})
			if err == nil {
				item = out.Attributes
			}
			return err
		})
		if err != nil {
			return nil, d.classify(err, d.tableName(t))
		}
	}
	return item, nil
}

// pruneRegistry removes the entries of item dead for PruneAfterLeases
// leases at now, each only if it still holds exactly what item shows.
func (d *Driver) pruneRegistry(ctx context.Context, t tbl, item map[string]types.AttributeValue, now time.Time) error {
	entries, err := registryEntries(item)
	if err != nil {
		return err
	}
	var dead []NodeInfo
	for _, n := range entries {
		if now.After(n.Heartbeat.Add(PruneAfterLeases * max(n.Lease, 0))) {
			dead = append(dead, n)
		}
	}
	for start := 0; start < len(dead); start += pruneBatch {
		batch := dead[start:min(start+pruneBatch, len(dead))]
		if err := d.removeEntries(ctx, t, batch); errors.Is(err, metastore.ErrConflict) && len(batch) > 1 {
			// One of them came back (or was pruned by another process):
			// remove the others one by one.
			for _, n := range batch {
				if err := d.removeEntries(ctx, t, []NodeInfo{n}); err != nil && !errors.Is(err, metastore.ErrConflict) {
					return err
				}
			}
		} else if err != nil && !errors.Is(err, metastore.ErrConflict) {
			return err
		}
	}
	return nil
}

// removeEntries removes ns from the registry in one update, conditioned on
// each entry holding exactly the bytes it was read with.
func (d *Driver) removeEntries(ctx context.Context, t tbl, ns []NodeInfo) error {
	var upd expression.UpdateBuilder
	var cond expression.ConditionBuilder
	for i, n := range ns {
		path := expression.Name("nodes." + n.ID)
		upd = upd.Remove(path)
		c := path.Equal(expression.Value(n.raw))
		if i == 0 {
			cond = c
		} else {
			cond = cond.And(c)
		}
	}
	_, err := d.updateRegistry(ctx, t, upd, &cond)
	return err
}

// registryEntries decodes the entries of the registry item.
func registryEntries(item map[string]types.AttributeValue) ([]NodeInfo, error) {
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
		n.raw = s.Value
		out = append(out, n)
	}
	return out, nil
}

// Nodes returns every node in the registry, live or not (an entry stays
// until it is pruned, PruneAfterLeases leases after its last heartbeat).
func (r Registry) Nodes(ctx context.Context) ([]NodeInfo, error) {
	d := r.d
	t, err := d.registryTable(ctx)
	if err != nil {
		return nil, err
	}
	item, _, err := d.getControl(ctx, d.tableName(t), registryKey)
	if err != nil {
		return nil, err
	}
	return registryEntries(item)
}

// StartHeartbeat heartbeats n into the node registry now and then every
// interval, until stop is called, which deregisters the node. A node that
// is killed stops counting as live when its lease (default three
// intervals) lapses; liveness is never left to TTL deletion. onErr, if set,
// receives heartbeat failures (the next beat retries).
func (r Registry) StartHeartbeat(ctx context.Context, n NodeInfo, interval time.Duration, onErr func(error)) (stop func(context.Context) error, err error) {
	if n.ID == "" || interval <= 0 {
		return nil, fmt.Errorf("%w: a heartbeat needs a node id and a positive interval", metastore.ErrInvalidArgument)
	}
	if n.Lease <= 0 {
		n.Lease = 3 * interval
	}
	if n.Lease < 2*interval {
		return nil, fmt.Errorf("%w: lease %v must be at least twice the heartbeat interval %v", metastore.ErrInvalidArgument, n.Lease, interval)
	}
	if _, err := r.Heartbeat(ctx, n); err != nil {
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
				if _, err := r.Heartbeat(hbCtx, n); err != nil && onErr != nil && hbCtx.Err() == nil {
					onErr(err)
				}
			}
		}
	}()
	return func(ctx context.Context) error {
		cancel()
		<-done
		return r.Deregister(ctx, n.ID)
	}, nil
}

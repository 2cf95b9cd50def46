package dynamostore

import (
	"context"
	"encoding/json"
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
func (r Registry) Heartbeat(ctx context.Context, n NodeInfo) (NodeInfo, error) {
	d := r.d
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
func (r Registry) Deregister(ctx context.Context, id string) error {
	d := r.d
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

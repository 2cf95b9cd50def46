package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Primitives is the migrator's handle on a store: the steps package migrate
// composes the migration from. They live here because they compose the
// store's transactions; the order and the gates between them are migrate's.
// Get one with Driver.Primitives; the contract never needs it.
type Primitives struct{ d *Driver }

// Primitives returns the migrator's handle on d.
func (d *Driver) Primitives() Primitives { return Primitives{d} }

// Table returns the v1 table name (the v2 table is Table() + V2Suffix).
func (p Primitives) Table() string { return p.d.v1 }

// MigrationSnapshot is the migration record as read, with the exact bytes a
// transition is guarded on.
type MigrationSnapshot struct {
	Migration
	// HasV1 and HasV2 tell which tables exist.
	HasV1, HasV2 bool
	// Standalone is set for a v2 table made without a migration (`lake
	// init` with layout v2): no v1 table and no migration record.
	Standalone bool
	raw1, raw2 []byte
}

// ReadMigration reads the migration record afresh.
func (p Primitives) ReadMigration(ctx context.Context) (MigrationSnapshot, error) {
	d := p.d
	s, err := d.state(ctx, true)
	if err != nil {
		return MigrationSnapshot{}, err
	}
	return MigrationSnapshot{Migration: s.m, HasV1: s.hasV1, HasV2: s.hasV2, raw1: s.raw1, raw2: s.raw2,
		Standalone: s.raw1 == nil && s.raw2 == nil && !s.hasV1}, nil
}

// CreateV2 creates the v2 table (if needed) with this process's layout
// parameters, for a migration entering dual.
func (p Primitives) CreateV2(ctx context.Context) error {
	d := p.d
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
func (p Primitives) Transition(ctx context.Context, from MigrationSnapshot, to Migration, barriers Barriers) error {
	d := p.d
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

// DeleteV1Table deletes the legacy table (retirement, when asked for); a
// table that is already gone is not an error.
func (p Primitives) DeleteV1Table(ctx context.Context) error {
	d := p.d
	_, err := d.api.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(d.v1)})
	if err = d.classify(err, d.v1); errors.Is(err, ErrNoTable) {
		return nil
	}
	return err
}

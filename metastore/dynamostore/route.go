package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/lakemeta/lake/metastore"
)

// mode is how a store applies a mutation in a migration state.
type mode int

const (
	modeV1      mode = iota // legacy table only
	modeV2                  // v2 table only
	modeDual                // barrier absent + v1 (authority) + v2 copy, one transaction
	modeV2Auth              // v2 (authority) + v1 mirror, one transaction
	modePaused              // finalization holds the barrier: writes wait
	modeRefused             // a forced layout would bypass the migration
)

// state returns the migration state, re-reading it when the cached copy is
// older than the refresh interval (or force is set).
func (d *Driver) state(ctx context.Context, force bool) (stateSnapshot, error) {
	d.mu.Lock()
	s := d.snap
	d.mu.Unlock()
	if !force && !s.fetched.IsZero() && time.Since(s.fetched) < d.refresh {
		return s, nil
	}
	fresh, err := d.readState(ctx)
	if errors.Is(err, errNoMigration) {
		if d.layout != LayoutV1 && fresh.hasV2 {
			// A standalone v2 table (made by `lake init` with layout v2):
			// no v1, no migration.
			fresh.m = Migration{State: StateV2Only}
			fresh.fetched = time.Now()
			err = nil
		} else {
			return s, fmt.Errorf("%w: %q (run `lake init` with this store URL to create it)", ErrNoTable, d.v1)
		}
	}
	if err != nil {
		return s, err
	}
	d.mu.Lock()
	d.snap = fresh
	d.mu.Unlock()
	return fresh, nil
}

// readLayout is the table reads use in a state.
func (d *Driver) readLayout(m Migration) Layout {
	switch d.layout {
	case LayoutV1, LayoutV2:
		return d.layout
	}
	if m.ReadsV2() {
		return LayoutV2
	}
	return LayoutV1
}

// writeMode is how mutations are applied in a state.
func (d *Driver) writeMode(m Migration) mode {
	switch d.layout {
	case LayoutV1:
		if m.State != StateV1 {
			return modeRefused
		}
		return modeV1
	case LayoutV2:
		// v2 alone is fine before a migration starts and after v1 retired;
		// in between, a v2-only write would bypass v1 (the authority, or
		// the mirror dual nodes still read during rollback).
		if m.State != StateV1 && m.State != StateV2Only {
			return modeRefused
		}
		return modeV2
	}
	switch m.State {
	case StateV1:
		return modeV1
	case StateDual, StateBackfill:
		if m.FinalizingSince != nil {
			return modePaused
		}
		return modeDual
	case StateV2Auth:
		return modeV2Auth
	default:
		return modeV2
	}
}

// mutation is one contract mutation, before it is planned for a mode.
type mutation struct {
	key    string
	expect *metastore.Expect // nil: unconditional Put
	value  []byte
	del    bool
	guard  *metastore.Guard
}

// maxPutRaces bounds how often a dual-mode Put re-reads v1 after losing a
// race with another writer.
const maxPutRaces = 16

// mutate applies m in the mode of the current state. A mutation that finds
// the barrier held (the state moved on under a stale cache) re-reads the
// state and is planned again; a finalization in progress gives
// ErrWritesPaused.
func (d *Driver) mutate(ctx context.Context, m mutation) error {
	force := false
	for attempt := 0; ; attempt++ {
		snap, err := d.state(ctx, force)
		if err != nil {
			return err
		}
		md := d.writeMode(snap.m)
		if md == modeV2Auth && !snap.hasV1 {
			md = modeV2 // v1 is gone: nothing left to mirror to
		}
		switch md {
		case modePaused:
			return fmt.Errorf("%w: migration finalization in progress since %s; retry later", metastore.ErrWritesPaused, snap.m.FinalizingSince.Format(time.RFC3339))
		case modeRefused:
			return fmt.Errorf("%w: the store is opened with layout %s but the migration is in state %s; writes through it would bypass the migration (open it without ?layout=)", metastore.ErrRefused, d.layout, snap.m.State)
		}
		expect := m.expect
		if expect == nil && md == modeDual {
			// A dual Put never blindly overwrites: it reads the authority
			// and writes both copies conditioned on what it read.
			cur, found, err := d.getRaw(ctx, tV1, m.key)
			if err != nil {
				return err
			}
			e := metastore.ExpectAbsent()
			if found {
				e = metastore.ExpectValue(cur)
			}
			expect = &e
		}
		if single(md, m) {
			t := tV1
			if md == modeV2 {
				t = tV2
			}
			err = d.putItem(ctx, t, m)
		} else {
			err = d.transact(ctx, d.plan(md, snap.m, m, expect))
		}
		switch {
		case errors.Is(err, errBarrier) && attempt < 3:
			force = true
			continue
		case errors.Is(err, errBarrier):
			return fmt.Errorf("%w: the write barrier is held; retry later", metastore.ErrWritesPaused)
		case md == modeV2Auth && errors.Is(err, ErrNoTable) && attempt < 3:
			force = true // v1 was deleted since the state was read: stop mirroring
			continue
		case m.expect == nil && md == modeDual && errors.Is(err, metastore.ErrConflict) && attempt < maxPutRaces:
			continue // another writer moved v1 between our read and write
		}
		return err
	}
}

// plan returns the transaction items of m in mode md.
func (d *Driver) plan(md mode, st Migration, m mutation, expect *metastore.Expect) []txItem {
	var items []txItem
	write := func(t tbl, r role, cond func(metastore.Expect) *expression.ConditionBuilder) {
		it := txItem{t: t, key: m.key, role: r, kind: kPut, value: m.value}
		if m.del {
			it.kind, it.value = kDelete, nil
		}
		if expect != nil && cond != nil {
			it.cond = cond(*expect)
		}
		items = append(items, it)
	}
	guard := func(t tbl) {
		if m.guard != nil {
			items = append(items, txItem{t: t, key: m.guard.Key, kind: kCheck, role: roleGuard, cond: condEquals(m.guard.Value)})
		}
	}
	switch md {
	case modeV1:
		guard(tV1)
		write(tV1, roleTarget, condExpect)
	case modeV2:
		guard(tV2)
		write(tV2, roleTarget, condExpect)
	case modeDual:
		shard := st.Barrier(m.key)
		items = append(items, txItem{t: tV2, key: BarrierKey(shard), kind: kCheck, role: roleBarrier, cond: condAbsent()})
		guard(tV1)
		write(tV1, roleTarget, condExpect)
		write(tV2, roleCopy, func(e metastore.Expect) *expression.ConditionBuilder { return condCopy(e, st.DualSince) })
		// The change log lets finalize re-verify only the keys written
		// since the online verify, instead of scanning both tables.
		now := time.Now()
		items = append(items, txItem{t: tV2, bucket: ChangeBucket(shard), key: changeKey(now, m.key), kind: kPut,
			value: changeValue(m.key), role: roleMirror, expires: now.Add(changeLogTTL).Unix()})
	case modeV2Auth:
		guard(tV2)
		write(tV2, roleTarget, condExpect)
		write(tV1, roleMirror, nil)
	}
	return items
}

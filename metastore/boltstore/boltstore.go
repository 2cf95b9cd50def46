// Package boltstore is lake's embedded backend: one bbolt file on one
// machine, keys in order, each commit fsynced before it is acknowledged.
//
// User keys live in one bucket and lake's control records in another, so a
// prefix read is a cursor seek that touches only matching keys (plus one to
// find the end) and never sees a control record. Writes are serialized by
// bbolt's single writer, which makes every conditional operation atomic.
//
// A bbolt file is open for writing in one process at a time, or for reading
// (Options.ReadOnly, a shared lock) in several. Open waits at most
// Options.LockTimeout for the file lock and then fails with ErrLocked, so a
// CLI run against the file of a running node fails fast instead of hanging.
//
// # Damage
//
// A damaged file is an error, never a crash or a write. Open checks the
// meta pages and the file's length before bbolt maps it; every
// bbolt call runs with faults turned into panics and recovered, and the
// first one poisons the driver; Check runs bbolt's consistency check behind
// a bounded walk of the pages. All of that lives in internal/boltfile, the
// one owner of the file, which the datastore's driver shares.
package boltstore

import (
	"bytes"
	"context"
	"fmt"

	"github.com/lakemeta/lake/internal/boltfile"
	"github.com/lakemeta/lake/metastore"
)

// Name is the backend name carried by this backend's cursors.
const Name = "bolt"

// NB: bucket names are part of the file format; they must not change.
var (
	dataBucket    = []byte("data")
	controlBucket = []byte("control")
)

// Driver is the bbolt implementation of metastore.Driver.
type Driver struct {
	// f opens, checks, guards and poisons the file (internal/boltfile).
	f *boltfile.File
}

var _ metastore.Driver = (*Driver)(nil)

// Name returns "bolt".
func (d *Driver) Name() string { return Name }

// Path returns the file path.
func (d *Driver) Path() string { return d.f.Path() }

// Get returns the value of key.
func (d *Driver) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var v []byte
	err := d.f.View("get", func(tx *boltfile.Tx) error {
		got := tx.Bucket(dataBucket).Get([]byte(key))
		if got == nil {
			return metastore.NotFound(key)
		}
		// bbolt's memory is valid only inside the transaction.
		v = bytes.Clone(got)
		return nil
	})
	return v, err
}

// Put writes value under key.
func (d *Driver) Put(ctx context.Context, key string, value []byte) error {
	return d.update(ctx, func(b *boltfile.Bucket) error {
		return b.Put([]byte(key), value)
	})
}

// CAS writes value under key if its current state satisfies expect.
func (d *Driver) CAS(ctx context.Context, key string, expect metastore.Expect, value []byte) error {
	return d.update(ctx, func(b *boltfile.Bucket) error {
		if err := check(b, key, expect); err != nil {
			return err
		}
		return b.Put([]byte(key), value)
	})
}

// GuardedMutate applies target if guard and target.Expect both hold.
func (d *Driver) GuardedMutate(ctx context.Context, guard metastore.Guard, target metastore.Mutation) error {
	return d.update(ctx, func(b *boltfile.Bucket) error {
		if err := check(b, guard.Key, metastore.ExpectValue(guard.Value)); err != nil {
			return metastore.Conflict(guard.Key, "guard does not hold its expected value")
		}
		if err := check(b, target.Key, target.Expect); err != nil {
			return err
		}
		if target.Delete {
			return b.Delete([]byte(target.Key))
		}
		return b.Put([]byte(target.Key), target.Value)
	})
}

// Delete removes key if it holds exactly expected.
func (d *Driver) Delete(ctx context.Context, key string, expected []byte) error {
	return d.update(ctx, func(b *boltfile.Bucket) error {
		if err := check(b, key, metastore.ExpectValue(expected)); err != nil {
			return err
		}
		return b.Delete([]byte(key))
	})
}

// List returns up to limit items under prefix after position pos, in key
// order. The position is the last key returned; the next page seeks past it.
func (d *Driver) List(ctx context.Context, prefix string, limit int, pos []byte) ([]metastore.Item, []byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	p := []byte(prefix)
	if pos != nil && !bytes.HasPrefix(pos, p) {
		return nil, nil, fmt.Errorf("%w: position lies outside prefix %q", metastore.ErrInvalidCursor, prefix)
	}
	var items []metastore.Item
	var next []byte
	err := d.f.View("list", func(tx *boltfile.Tx) error {
		c := tx.Bucket(dataBucket).Cursor()
		var k, v []byte
		if pos == nil {
			k, v = c.Seek(p)
		} else {
			k, v = c.Seek(pos)
			if bytes.Equal(k, pos) {
				k, v = c.Next()
			}
		}
		used := 0
		order := boltfile.After(pos)
		for ; k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			if last := order.Last(); !order.Next(k) {
				// Only a damaged tree goes back: paging on from here could
				// return the same keys forever (boltfile.Ascending).
				return d.f.Poison("list", fmt.Sprintf("keys out of order (%.40q after %.40q)", k, last))
			}
			if err := metastore.ValidateKey(string(k)); err != nil {
				// No lake write stores such a key: the page holding it is
				// damaged, and whatever else it holds cannot be trusted.
				return d.f.Poison("list", fmt.Sprintf("a key lake cannot have written (%.40q)", k))
			}
			if len(items) == limit || metastore.PageFull(len(items), used, len(k)+len(v)) {
				// One more matching key exists: the listing goes on.
				next = []byte(items[len(items)-1].Key)
				return nil
			}
			used += len(k) + len(v)
			items = append(items, metastore.Item{Key: string(k), Value: bytes.Clone(v)})
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return items, next, nil
}

// Close closes the file. A poisoned driver gives up waiting for bbolt after
// a second.
func (d *Driver) Close() error { return d.f.Close() }

// Poisoned reports the error that poisoned the file, or nil while it is
// sound.
func (d *Driver) Poisoned() error { return d.f.Poisoned() }

// Health implements metastore.Health: the poisoning error, once a fault
// was met (here or by the datastore's driver on the same file).
func (d *Driver) Health() error { return d.f.Poisoned() }

var _ metastore.Health = (*Driver)(nil)

func (d *Driver) update(ctx context.Context, fn func(b *boltfile.Bucket) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.f.Update("write", func(tx *boltfile.Tx) error { return fn(tx.Bucket(dataBucket)) })
}

func check(b *boltfile.Bucket, key string, expect metastore.Expect) error {
	cur := b.Get([]byte(key))
	if !expect.Matches(cur != nil, cur) {
		switch {
		case expect.Absent():
			return metastore.Conflict(key, "expected absent, key exists")
		case cur == nil:
			return metastore.Conflict(key, "expected a value, key is absent")
		default:
			return metastore.Conflict(key, "current value differs from expected")
		}
	}
	return nil
}

// File returns the open file, so that the datastore's driver
// (datastore/boltfs.New) can keep its own buckets in the same file within
// the same process, under the same guard and poison: a node serves both
// from one file. The caller MUST NOT close it; Close does.
func (d *Driver) File() *boltfile.File { return d.f }

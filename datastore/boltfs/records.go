package boltfs

import (
	"bytes"
	"context"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/boltfile"
	"github.com/lakemeta/lake/metastore"
)

// GetRecord returns a lock record.
func (d *Driver) GetRecord(ctx context.Context, key string) ([]byte, error) {
	var out []byte
	err := d.view(ctx, func(tx *boltfile.Tx) error {
		var v []byte
		if b := tx.Bucket(bRecords); b != nil {
			v = b.Get([]byte(key))
		}
		if v == nil {
			return metastore.NotFound(key)
		}
		out = bytes.Clone(v)
		return nil
	})
	return out, err
}

// CASRecord writes a lock record if it satisfies expect.
func (d *Driver) CASRecord(ctx context.Context, key string, expect metastore.Expect, value []byte) error {
	return d.update(ctx, func(tx *boltfile.Tx) error {
		b := tx.Bucket(bRecords)
		cur := b.Get([]byte(key))
		if !expect.Matches(cur != nil, cur) {
			return metastore.Conflict(key, "record differs from expected")
		}
		return b.Put([]byte(key), bytes.Clone(value))
	})
}

// DeleteRecord deletes a lock record if it holds exactly expected.
func (d *Driver) DeleteRecord(ctx context.Context, key string, expected []byte) error {
	return d.update(ctx, func(tx *boltfile.Tx) error {
		b := tx.Bucket(bRecords)
		cur := b.Get([]byte(key))
		if cur == nil || !bytes.Equal(cur, expected) {
			return metastore.Conflict(key, "record differs from expected")
		}
		return b.Delete([]byte(key))
	})
}

// ListRecords returns the lock records under prefix, sorted.
func (d *Driver) ListRecords(ctx context.Context, prefix string) ([]metastore.Item, error) {
	var out []metastore.Item
	err := d.view(ctx, func(tx *boltfile.Tx) error {
		b := tx.Bucket(bRecords)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
			out = append(out, metastore.Item{Key: string(k), Value: bytes.Clone(v)})
		}
		return nil
	})
	return out, err
}

// FencedRecord writes a record if it satisfies expect while the fence holds.
func (d *Driver) FencedRecord(ctx context.Context, fence datastore.Fence, key string, expect metastore.Expect, value []byte) error {
	return d.update(ctx, func(tx *boltfile.Tx) error {
		b := tx.Bucket(bRecords)
		if f := b.Get([]byte(fence.Key)); f == nil || !bytes.Equal(f, fence.Token) {
			return metastore.Conflict(fence.Key, datastore.FenceReason)
		}
		cur := b.Get([]byte(key))
		if !expect.Matches(cur != nil, cur) {
			return metastore.Conflict(key, "record differs from expected")
		}
		return b.Put([]byte(key), bytes.Clone(value))
	})
}

package boltfs

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/boltfile"
	"github.com/lakemeta/lake/metastore"
)

func jsonUnmarshal(raw []byte, v any, key []byte) error {
	if err := json.Unmarshal(raw, v); err != nil {
		// A record another program wrote, not damage of the file's pages
		// (those the open checks and the guard catch): the one object is
		// reported, naming lake data check, which sets it aside; the file
		// is not poisoned, so every other path reads on.
		return datastore.Damaged(fmt.Sprintf("bolt datastore record %q", key), "not JSON: %v", err)
	}
	return nil
}

func (d *Driver) readHead(tx *boltfile.Tx, partition string) (headRec, error) {
	var h headRec
	_, err := getJSON(d.bkt(tx, bHeads), []byte(partition), &h)
	return h, err
}

// Head returns partition's head.
func (d *Driver) Head(ctx context.Context, partition string) (datastore.Head, error) {
	var h headRec
	err := d.view(ctx, func(tx *boltfile.Tx) error {
		var err error
		h, err = d.readHead(tx, partition)
		return err
	})
	return datastore.Head{Partition: partition, Seq: h.Seq, Floor: h.Floor}, err
}

// Changes reads partition's feed after after, up to its head.
func (d *Driver) Changes(ctx context.Context, partition string, after uint64, limit int) ([]datastore.Info, uint64, error) {
	var out []datastore.Info
	var upTo uint64
	err := d.view(ctx, func(tx *boltfile.Tx) error {
		h, err := d.readHead(tx, partition)
		if err != nil {
			return err
		}
		if after < h.Floor {
			return fmt.Errorf("%w: partition %q position %d, floor %d", datastore.ErrHorizon, partition, after, h.Floor)
		}
		if after > h.Seq {
			return fmt.Errorf("%w: position %d is beyond partition %q's head %d", metastore.ErrInvalidArgument, after, partition, h.Seq)
		}
		upTo = h.Seq
		start := feedKey(partition, after+1)
		end := feedKey(partition, h.Seq)
		fb := d.bkt(tx, bFeed)
		if fb == nil {
			return nil
		}
		c := fb.Cursor()
		order := boltfile.After(feedKey(partition, after))
		for k, v := c.Seek(start); k != nil && bytes.Compare(k, end) <= 0; k, v = c.Next() {
			if !order.Next(k) {
				// A reader paging on from a position that went back could
				// read the same changes forever.
				return damagef("datastore feed of %q out of order", partition)
			}
			if len(out) == limit {
				upTo = out[len(out)-1].Pos
				return nil
			}
			var r fileRec
			ok, err := getJSON(d.bkt(tx, bFiles), v, &r)
			if err != nil {
				return err
			}
			if !ok || r.Pos != binary.BigEndian.Uint64(k[len(k)-8:]) {
				return damagef("datastore feed entry %d of %q disagrees with its file record", binary.BigEndian.Uint64(k[len(k)-8:]), partition)
			}
			out = append(out, r.info(string(v), partition))
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return out, upTo, nil
}

// Partitions returns the registered partitions, sorted.
func (d *Driver) Partitions(ctx context.Context) ([]string, error) {
	var out []string
	err := d.view(ctx, func(tx *boltfile.Tx) error {
		b := d.bkt(tx, bRegistry)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, _ []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	slices.Sort(out)
	return out, err
}

// ChangedPartitions walks the index after the cursor, an index position.
func (d *Driver) ChangedPartitions(ctx context.Context, cursor []byte) ([]datastore.Head, []byte, error) {
	var after uint64
	if cursor != nil {
		if len(cursor) != 8 {
			return nil, nil, fmt.Errorf("%w: not a bolt feed cursor", metastore.ErrInvalidCursor)
		}
		after = binary.BigEndian.Uint64(cursor)
	}
	var out []datastore.Head
	var next uint64
	err := d.view(ctx, func(tx *boltfile.Tx) error {
		if meta := d.bkt(tx, bMeta); meta != nil {
			if raw := meta.Get(keyISeq); len(raw) == 8 {
				next = binary.BigEndian.Uint64(raw)
			} else if raw != nil {
				return damagef("a datastore index counter of %d bytes", len(raw))
			}
		}
		if after > next {
			return fmt.Errorf("%w: feed cursor is beyond the index", metastore.ErrInvalidCursor)
		}
		ib := d.bkt(tx, bIndex)
		if ib == nil {
			return nil
		}
		c := ib.Cursor()
		order := boltfile.After(u64(after))
		for k, v := c.Seek(u64(after + 1)); k != nil; k, v = c.Next() {
			if !order.Next(k) {
				return damagef("datastore index out of order")
			}
			h, err := d.readHead(tx, string(v))
			if err != nil {
				return err
			}
			out = append(out, datastore.Head{Partition: string(v), Seq: h.Seq, Floor: h.Floor})
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, u64(next), nil
}

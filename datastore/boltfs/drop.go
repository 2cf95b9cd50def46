package boltfs

import (
	"bytes"
	"context"
	"encoding/binary"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/boltfile"
	"github.com/lakemeta/lake/metastore"
)

// DropPartition removes partition whole in one transaction: each path's
// record and feed entry (a live version goes to the garbage, a tombstone's
// purge entry goes with it), then its head, index entry and registry entry.
func (d *Driver) DropPartition(ctx context.Context, fence *datastore.Fence, partition string, now time.Time) (datastore.DropStats, error) {
	var st datastore.DropStats
	err := d.update(ctx, func(tx *boltfile.Tx) error {
		st = datastore.DropStats{}
		if fence != nil {
			cur := tx.Bucket(bRecords).Get([]byte(fence.Key))
			if cur == nil || !bytes.Equal(cur, fence.Token) {
				return metastore.Conflict(fence.Key, datastore.FenceReason)
			}
		}
		files, feed := d.bkt(tx, bFiles), d.bkt(tx, bFeed)
		prefix := append([]byte(partition), 0)
		c := feed.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8; k, v = c.Seek(prefix) {
			var r fileRec
			ok, err := getJSON(files, v, &r)
			if err != nil {
				return err
			}
			if ok {
				if r.Deleted {
					if err := d.bkt(tx, bTombs).Delete(timeKey(time.Unix(0, r.Time), string(v))); err != nil {
						return err
					}
					st.Tombstones++
				} else {
					if r.Chunks > 0 {
						if err := d.bkt(tx, bGarbage).Put(timeKey(now, r.Version), binary.BigEndian.AppendUint32(nil, uint32(r.Chunks))); err != nil {
							return err
						}
					}
					st.Files++
				}
				if err := files.Delete(v); err != nil {
					return err
				}
			}
			if err := c.Delete(); err != nil {
				return err
			}
		}
		h, err := d.readHead(tx, partition)
		if err != nil {
			return err
		}
		if h.ISeq != 0 {
			if err := d.bkt(tx, bIndex).Delete(u64(h.ISeq)); err != nil {
				return err
			}
		}
		if err := d.bkt(tx, bHeads).Delete([]byte(partition)); err != nil {
			return err
		}
		return d.bkt(tx, bRegistry).Delete([]byte(partition))
	})
	return st, err
}

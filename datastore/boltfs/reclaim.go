package boltfs

import (
	"bytes"
	"context"
	"encoding/binary"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/boltfile"
)

// Reclaim deletes expired uploads' and replaced versions' chunks and purges
// old tombstones, in one transaction.
func (d *Driver) Reclaim(ctx context.Context, now time.Time, o datastore.ReclaimOptions) (datastore.ReclaimStats, error) {
	var st datastore.ReclaimStats
	err := d.update(ctx, func(tx *boltfile.Tx) error {
		st = datastore.ReclaimStats{}
		graceEnd := now.Add(-o.Grace).UnixNano()
		uploadEnd := now.Add(-o.UploadGrace).UnixNano()
		// Uploads that never committed: the intent goes with the chunks,
		// so a late Commit finds no intent and refuses.
		var expired [][]byte
		err := d.bkt(tx, bIntents).ForEach(func(k, v []byte) error {
			var in intentRec
			if err := jsonUnmarshal(v, &in, k); err != nil {
				return err
			}
			if in.Started < uploadEnd {
				expired = append(expired, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, version := range expired {
			if err := d.bkt(tx, bIntents).Delete(version); err != nil {
				return err
			}
			n, err := d.deleteChunks(tx, string(version), -1)
			if err != nil {
				return err
			}
			st.Uploads++
			st.Chunks += n
		}
		g := d.bkt(tx, bGarbage).Cursor()
		for k, v := g.First(); k != nil && int64(binary.BigEndian.Uint64(k[:8])) < graceEnd; k, v = g.First() {
			n, err := d.deleteChunks(tx, string(k[8:]), int(binary.BigEndian.Uint32(v)))
			if err != nil {
				return err
			}
			if err := g.Delete(); err != nil {
				return err
			}
			st.Versions++
			st.Chunks += n
		}
		horizonEnd := now.Add(-o.Horizon).UnixNano()
		t := d.bkt(tx, bTombs).Cursor()
		for k, v := t.First(); k != nil && int64(binary.BigEndian.Uint64(k[:8])) < horizonEnd; k, v = t.First() {
			if err := d.purgeTombstone(tx, string(k[8:]), binary.BigEndian.Uint64(v)); err != nil {
				return err
			}
			if err := t.Delete(); err != nil {
				return err
			}
			st.Tombstones++
		}
		return nil
	})
	return st, err
}

// deleteChunks deletes the chunks of version (those numbered below n, or
// every one when n < 0) and returns how many it deleted. It walks the
// chunks that exist rather than counting to n: n comes from the file, and
// a damaged count must not become a loop of four billion lookups.
func (d *Driver) deleteChunks(tx *boltfile.Tx, version string, n int) (int, error) {
	b := d.bkt(tx, bChunks)
	prefix := []byte(version + "/")
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if len(k) != len(prefix)+4 || n >= 0 && int64(binary.BigEndian.Uint32(k[len(prefix):])) >= int64(n) {
			continue
		}
		keys = append(keys, bytes.Clone(k))
	}
	for i, k := range keys {
		if err := b.Delete(k); err != nil {
			return i, err
		}
	}
	return len(keys), nil
}

// purgeTombstone removes path's tombstone at pos, if it is still the path's
// latest state, and raises its partition's floor to pos: a puller below it
// may have missed the delete.
func (d *Driver) purgeTombstone(tx *boltfile.Tx, path string, pos uint64) error {
	var r fileRec
	ok, err := getJSON(d.bkt(tx, bFiles), []byte(path), &r)
	if err != nil || !ok || !r.Deleted || r.Pos != pos {
		return err
	}
	part := d.partition(path)
	if err := d.bkt(tx, bFiles).Delete([]byte(path)); err != nil {
		return err
	}
	if err := d.bkt(tx, bFeed).Delete(feedKey(part, pos)); err != nil {
		return err
	}
	h, err := d.readHead(tx, part)
	if err != nil {
		return err
	}
	h.Floor = max(h.Floor, pos)
	return putJSON(d.bkt(tx, bHeads), []byte(part), h)
}

package boltfs

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/boltfile"
	"github.com/lakemeta/lake/metastore"
)

// BeginUpload records the upload intent.
func (d *Driver) BeginUpload(ctx context.Context, s datastore.Staged) error {
	return d.update(ctx, func(tx *boltfile.Tx) error {
		return putJSON(d.bkt(tx, bIntents), []byte(s.Version), intentRec{Path: s.Path, Started: s.Started.UnixNano()})
	})
}

// PutChunk stores chunk i of version, once: a chunk that exists is never
// overwritten (the same bytes again are a retry and succeed, other bytes a
// conflict), and a new chunk needs the version's live upload intent (a
// version committed, reclaimed or never begun takes none), checked in the
// same transaction (issue 26).
func (d *Driver) PutChunk(ctx context.Context, version string, i int, data []byte) error {
	err := d.putChunk(ctx, version, i, data)
	if err == nil {
		_ = d.view(ctx, func(tx *boltfile.Tx) error { dropAllMapped(tx); return nil })
	}
	return err
}

func (d *Driver) putChunk(ctx context.Context, version string, i int, data []byte) error {
	return d.update(ctx, func(tx *boltfile.Tx) error {
		chunks, k := d.bkt(tx, bChunks), chunkKey(version, i)
		if cur := chunks.Get(k); cur != nil {
			if bytes.Equal(cur, data) {
				return nil
			}
			return metastore.Conflict(fmt.Sprintf("chunk %d of version %s", i, version), datastore.ChunkReason)
		}
		if d.bkt(tx, bIntents).Get([]byte(version)) == nil {
			return fmt.Errorf("%w: chunk %d of version %s has no live upload intent (never begun, committed or reclaimed)", datastore.ErrUploadExpired, i, version)
		}
		return chunks.Put(k, data)
	})
}

// Commit applies entries in one bbolt transaction.
func (d *Driver) Commit(ctx context.Context, fence *datastore.Fence, entries []datastore.Entry, now time.Time) ([]datastore.Info, error) {
	var out []datastore.Info
	err := d.update(ctx, func(tx *boltfile.Tx) error {
		out = nil
		if fence != nil {
			cur := tx.Bucket(bRecords).Get([]byte(fence.Key))
			if cur == nil || !bytes.Equal(cur, fence.Token) {
				return metastore.Conflict(fence.Key, datastore.FenceReason)
			}
		}
		files, feed, heads := d.bkt(tx, bFiles), d.bkt(tx, bFeed), d.bkt(tx, bHeads)
		touched := map[string]*headRec{}
		var order []string
		for _, e := range entries {
			path := e.Path()
			part := d.partition(path)
			var cur fileRec
			exists, err := getJSON(files, []byte(path), &cur)
			if err != nil {
				return err
			}
			if e.Put == nil && (!exists || cur.Deleted) {
				continue // nothing to delete: no change, no position
			}
			// An inline file has no intent (nor chunks): the record
			// written here is all of it.
			if e.Put != nil && e.Put.Chunks > 0 && d.bkt(tx, bIntents).Get([]byte(e.Put.Version)) == nil {
				return fmt.Errorf("%w: %q version %s", datastore.ErrUploadExpired, path, e.Put.Version)
			}
			h := touched[part]
			if h == nil {
				h = &headRec{}
				if _, err := getJSON(heads, []byte(part), h); err != nil {
					return err
				}
				touched[part] = h
				order = append(order, part)
			}
			h.Seq++
			rec := fileRec{Pos: h.Seq, Time: now.UnixNano()}
			if exists {
				if err := feed.Delete(feedKey(part, cur.Pos)); err != nil {
					return err
				}
				if !cur.Deleted && cur.Chunks > 0 {
					err := d.bkt(tx, bGarbage).Put(timeKey(now, cur.Version), binary.BigEndian.AppendUint32(nil, uint32(cur.Chunks)))
					if err != nil {
						return err
					}
				}
			}
			if e.Put != nil {
				s := e.Put
				rec.Version, rec.Size, rec.Chunks, rec.SHA256, rec.Meta, rec.Inline = s.Version, s.Size, s.Chunks, s.SHA256, s.Meta, s.Inline
				if err := d.bkt(tx, bIntents).Delete([]byte(s.Version)); err != nil {
					return err
				}
			} else {
				rec.Deleted = true
				if err := d.bkt(tx, bTombs).Put(timeKey(now, path), u64(rec.Pos)); err != nil {
					return err
				}
			}
			if err := putJSON(files, []byte(path), rec); err != nil {
				return err
			}
			if err := feed.Put(feedKey(part, rec.Pos), []byte(path)); err != nil {
				return err
			}
			out = append(out, rec.info(path, part))
		}
		if err := checkClash(files, entries); err != nil { // clash.go
			return err
		}
		return d.advance(tx, touched, order)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// advance registers the touched partitions, moves each one's index entry to
// the next index position and saves its head.
func (d *Driver) advance(tx *boltfile.Tx, touched map[string]*headRec, order []string) error {
	meta, index := d.bkt(tx, bMeta), d.bkt(tx, bIndex)
	var iseq uint64
	if raw := meta.Get(keyISeq); raw != nil {
		iseq = binary.BigEndian.Uint64(raw)
	}
	for _, part := range order {
		h := touched[part]
		if err := d.bkt(tx, bRegistry).Put([]byte(part), nil); err != nil {
			return err
		}
		if h.ISeq != 0 {
			if err := index.Delete(u64(h.ISeq)); err != nil {
				return err
			}
		}
		iseq++
		h.ISeq = iseq
		if err := index.Put(u64(iseq), []byte(part)); err != nil {
			return err
		}
		if err := putJSON(d.bkt(tx, bHeads), []byte(part), h); err != nil {
			return err
		}
	}
	return meta.Put(keyISeq, u64(iseq))
}

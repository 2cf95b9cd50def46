package boltfs

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/boltfile"
	"github.com/lakemeta/lake/metastore"
)

// GetChunk returns chunk i of version.
func (d *Driver) GetChunk(ctx context.Context, version string, i int) ([]byte, error) {
	var out []byte
	err := d.view(ctx, func(tx *boltfile.Tx) error {
		var v []byte
		if b := d.bkt(tx, bChunks); b != nil {
			v = b.Get(chunkKey(version, i))
		}
		if v == nil {
			return fmt.Errorf("%w: chunk %d of version %s", metastore.ErrNotFound, i, version)
		}
		out = bytes.Clone(v)
		dropMapped(tx, v)
		return nil
	})
	return out, err
}

// Stat returns the latest state of each path that has one.
func (d *Driver) Stat(ctx context.Context, paths []string) (map[string]datastore.Info, error) {
	out := make(map[string]datastore.Info, len(paths))
	err := d.view(ctx, func(tx *boltfile.Tx) error {
		for _, p := range paths {
			var r fileRec
			ok, err := getJSON(d.bkt(tx, bFiles), []byte(p), &r)
			if err != nil {
				return err
			}
			if ok {
				out[p] = r.info(p, d.partition(p))
			}
		}
		return nil
	})
	return out, err
}

// List returns live files under prefix in path order; the position is the
// last path returned.
func (d *Driver) List(ctx context.Context, prefix string, limit int, pos []byte) ([]datastore.Info, []byte, error) {
	if pos != nil && !strings.HasPrefix(string(pos), prefix) {
		return nil, nil, fmt.Errorf("%w: position lies outside prefix %q", metastore.ErrInvalidCursor, prefix)
	}
	var files []datastore.Info
	var next []byte
	err := d.view(ctx, func(tx *boltfile.Tx) error {
		b := d.bkt(tx, bFiles)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		k, v := c.Seek([]byte(prefix))
		if pos != nil {
			k, v = c.Seek(pos)
			if bytes.Equal(k, pos) {
				k, v = c.Next()
			}
		}
		order := boltfile.After(pos)
		for ; k != nil && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
			if last := order.Last(); !order.Next(k) {
				// Paging on from a key that went back could never end.
				return damagef("datastore paths out of order (%.60q after %.60q)", k, last)
			}
			if len(files) == limit {
				next = []byte(files[len(files)-1].Path)
				return nil
			}
			var r fileRec
			if err := jsonUnmarshal(v, &r, k); err != nil {
				return err
			}
			if !r.Deleted {
				files = append(files, r.info(string(k), d.partition(string(k))))
			}
		}
		return nil
	})
	return files, next, err
}

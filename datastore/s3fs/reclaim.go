package s3fs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// Reclaim implements datastore.Driver. Besides the chunks of expired
// uploads and replaced versions and the tombstones past the horizon, it
// compacts each partition's log: an object none of whose entries is a
// path's latest change any more is deleted once it is older than the grace
// period (by S3's LastModified), unless it is the log's last. So a log holds
// at most one object per live path plus the commits of the grace period.
func (d *Driver) Reclaim(ctx context.Context, now time.Time, o datastore.ReclaimOptions) (datastore.ReclaimStats, error) {
	var st datastore.ReclaimStats
	if err := d.reclaimUploads(ctx, now, o.UploadGrace, &st); err != nil {
		return st, err
	}
	if err := d.reclaimVersions(ctx, now, o.Grace, &st); err != nil {
		return st, err
	}
	parts, err := d.Partitions(ctx)
	if err != nil {
		return st, err
	}
	for _, part := range parts {
		if err := d.compact(ctx, part, now, o, &st); err != nil {
			return st, err
		}
	}
	return st, nil
}

// deleteChunks deletes the chunks of version and returns how many.
func (d *Driver) deleteChunks(ctx context.Context, version string) (int, error) {
	keys, err := d.c.listAll(ctx, d.chunkPrefix(version), "")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		if err := d.c.deleteIf(ctx, k.key, k.etag); err != nil && !errors.Is(err, metastore.ErrConflict) {
			return n, err
		}
		n++
	}
	return n, nil
}

func (d *Driver) reclaimUploads(ctx context.Context, now time.Time, grace time.Duration, st *datastore.ReclaimStats) error {
	keys, err := d.c.listAll(ctx, d.prefix+"u/", "")
	if err != nil {
		return err
	}
	for _, k := range keys {
		version := trimPrefix(k.key, d.prefix+"u/")
		o, err := d.c.get(ctx, k.key)
		if errors.Is(err, metastore.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		var u upload
		if err := json.Unmarshal(o.body, &u); err != nil {
			return fmt.Errorf("lake: s3 upload intent %q is corrupt: %v", k.key, err)
		}
		if now.Sub(u.Started) <= grace {
			continue
		}
		// A committed version's chunks are the file's (or, once replaced,
		// its v/ marker's to reclaim): only the intent goes.
		committed := false
		if m, err := d.Stat(ctx, []string{u.Path}); err != nil {
			return err
		} else if info, ok := m[u.Path]; ok && info.Version == version {
			committed = true
		}
		if !committed {
			if _, err := d.c.head(ctx, d.replacedKey(version)); err == nil {
				committed = true
			} else if !errors.Is(err, metastore.ErrNotFound) {
				return err
			}
		}
		if !committed {
			n, err := d.deleteChunks(ctx, version)
			if err != nil {
				return err
			}
			st.Uploads++
			st.Chunks += n
		}
		if err := d.c.deleteIf(ctx, k.key, o.etag); err != nil && !errors.Is(err, metastore.ErrConflict) {
			return err
		}
	}
	return nil
}

// reclaimSkew is how far the store's clock (LastModified) may run ahead of
// ours before a due marker is skipped for one more reclaim.
const reclaimSkew = time.Minute

func (d *Driver) reclaimVersions(ctx context.Context, now time.Time, grace time.Duration, st *datastore.ReclaimStats) error {
	keys, err := d.c.listAll(ctx, d.prefix+"v/", "")
	if err != nil {
		return err
	}
	for _, k := range keys {
		// A marker the store stamped well within the grace period is not
		// due: skip its GET, so that a reclaim run often (the lifecycle's)
		// costs one LIST per 1,000 young markers, not a GET each. Skipping
		// only ever delays a reclaim; the marker's own time decides.
		if !k.mod.IsZero() && now.Sub(k.mod) < grace-reclaimSkew {
			continue
		}
		o, err := d.c.get(ctx, k.key)
		if errors.Is(err, metastore.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		var r replaced
		if err := json.Unmarshal(o.body, &r); err != nil {
			return fmt.Errorf("lake: s3 replaced-version marker %q is corrupt: %v", k.key, err)
		}
		if now.Sub(r.Time) <= grace {
			continue
		}
		n, err := d.deleteChunks(ctx, trimPrefix(k.key, d.prefix+"v/"))
		if err != nil {
			return err
		}
		if err := d.c.deleteIf(ctx, k.key, o.etag); err != nil && !errors.Is(err, metastore.ErrConflict) {
			return err
		}
		st.Versions++
		st.Chunks += n
	}
	return nil
}

// compact rolls part forward, purges its tombstones past the horizon
// (raising its floor) and deletes its dead log objects.
func (d *Driver) compact(ctx context.Context, part string, now time.Time, o datastore.ReclaimOptions, st *datastore.ReclaimStats) error {
	t, err := d.readTail(ctx, part, false)
	if err != nil || !t.exists {
		return err
	}
	if err := d.rollForward(ctx, part, t, now); err != nil {
		return err
	}
	keys, err := d.c.listAll(ctx, d.logPrefix(part), "")
	if err != nil {
		return err
	}
	type idx struct {
		e    *indexEntry
		etag string
	}
	index := map[string]idx{}
	floor := uint64(0)
	for i, k := range keys {
		obj, err := d.readLog(ctx, k.key)
		if errors.Is(err, metastore.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		dead := true
		for j, e := range obj.Entries {
			pos := obj.First + uint64(j)
			cur, ok := index[e.Path]
			if !ok {
				ie, etag, err := d.readIndex(ctx, e.Path)
				if err != nil {
					return err
				}
				cur = idx{ie, etag}
				index[e.Path] = cur
			}
			if cur.e == nil || cur.e.Pos != pos {
				continue // superseded (or its tombstone purged)
			}
			if cur.e.Deleted && now.Sub(cur.e.Time) > o.Horizon {
				err := d.c.deleteIf(ctx, d.fileKey(e.Path), cur.etag)
				if errors.Is(err, metastore.ErrConflict) {
					dead = false // changed meanwhile: leave it to the next run
					continue
				}
				if err != nil {
					return err
				}
				index[e.Path] = idx{}
				st.Tombstones++
				floor = max(floor, pos)
				continue
			}
			dead = false
		}
		last := i == len(keys)-1
		if dead && !last && d.c.clock.now().Sub(k.mod) > o.Grace { // by S3's clock
			if err := d.c.deleteIf(ctx, k.key, k.etag); err != nil && !errors.Is(err, metastore.ErrConflict) {
				return err
			}
		}
	}
	return d.raiseFloor(ctx, part, floor)
}

func (d *Driver) raiseFloor(ctx context.Context, part string, floor uint64) error {
	for attempt := 0; ; attempt++ {
		h, etag, ok, err := d.readHead(ctx, part)
		if err != nil || !ok || h.Floor >= floor {
			return err
		}
		h.Floor = floor
		body, _ := json.Marshal(h)
		_, err = d.c.replace(ctx, d.headKey(part), etag, body)
		if !errors.Is(err, metastore.ErrConflict) {
			return err
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
}

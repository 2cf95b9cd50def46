package s3fs

import (
	"context"
	"errors"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// maxDropPasses bounds the passes of DropPartition: a pass that finds the
// partition still holding something (a commit landed while it was being
// removed) is followed by another.
const maxDropPasses = 4

// DropPartition implements datastore.Driver. S3 has no multi-object write,
// so a drop is a sequence of conditional requests in an order that a crash
// may interrupt anywhere and a second call finishes:
//
//  1. the fence, as a commit checks it: the lock record holds the fence's
//     bytes, and the log's last object names no newer token of that lock;
//  2. the log rolled forward, so that the path index names every live
//     version (and marks the versions the pending changes replaced);
//  3. the fence read again, right before the first removal;
//  4. each index entry of the partition's paths (f/PATH~, tombstones
//     included): a live one's version marked replaced at now (q/NOW/VERSION
//     and v/VERSION, for Reclaim), then the entry deleted;
//  5. each log object;
//  6. the head, which is the registry entry and what ChangedPartitions
//     compares: last, so that a partly dropped partition is still listed
//     and a retry finds it.
//
// Every removal is a DeleteObject with If-Match on the ETag read. Then the
// partition is read again, and a pass repeats while it holds anything: a
// commit that read the partition's tail before the drop and created its
// log object during it is dropped too. One that lands after the last pass
// is left without a head (see docs/s3.md, "Dropping a partition").
func (d *Driver) DropPartition(ctx context.Context, fence *datastore.Fence, part string, now time.Time) (datastore.DropStats, error) {
	var st datastore.DropStats
	d.c.handoff.Delete(d.prefix + part) // a Stat's tail of the log that goes (handoff.go)
	ft, err := d.checkFence(ctx, fence)
	if err != nil {
		return st, err
	}
	// The log goes: so does what compaction remembers of it (the mark
	// would not be trusted for a new log anyway, see compact).
	if err := d.dropMark(ctx, part); err != nil {
		return st, err
	}
	for pass := 0; pass < maxDropPasses; pass++ {
		t, err := d.readTail(ctx, part, true)
		if err != nil {
			return st, err
		}
		if ft != nil && ft.Token != 0 && t.last != nil && t.last.Fences[ft.Key] > ft.Token {
			// A newer holder fenced this log (a conflict), or no holder
			// wrote that value (ignored, see newerFence).
			if err := d.newerFence(ctx, fence); err != nil {
				return st, err
			}
		}
		if t.exists {
			if err := d.rollForward(ctx, part, t, now); err != nil {
				return st, err
			}
		}
		logs, err := d.c.listAll(ctx, d.logPrefix(part), "")
		if err != nil {
			return st, err
		}
		files, err := d.partitionFiles(ctx, part)
		if err != nil {
			return st, err
		}
		if !t.exists && len(logs) == 0 && len(files) == 0 {
			d.forgetClaims(ctx, part) // claims.go
			return st, nil
		}
		if fence != nil {
			if _, err := d.checkFence(ctx, fence); err != nil {
				return st, err
			}
		}
		for _, p := range files {
			if err := d.dropFile(ctx, p, now, &st); err != nil {
				return st, err
			}
		}
		for _, k := range logs {
			if err := d.c.deleteIf(ctx, k.key, k.etag); err != nil && !errors.Is(err, metastore.ErrConflict) {
				return st, err
			}
		}
		if err := d.dropHead(ctx, part); err != nil {
			return st, err
		}
	}
	return st, metastore.Conflict(d.headKey(part), "the partition was written to throughout its drop; drop it again")
}

// partitionFiles returns the paths of part that have an index entry: a
// LIST of the index under the partition's path prefix (which, for the
// partition "data", also holds the models' paths, filtered out).
func (d *Driver) partitionFiles(ctx context.Context, part string) ([]string, error) {
	dir := d.prefix + "f/"
	keys, err := d.c.listAll(ctx, dir+escape(datastore.PartitionPrefix(part)), "")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range keys {
		if p := unleaf(trimPrefix(k.key, dir)); d.partition(p) == part {
			out = append(out, p)
		}
	}
	return out, nil
}

// dropFile deletes path's index entry, first handing a live version to
// Reclaim as replaced at now. An entry that changed under the delete is
// read again: a commit rolled forward meanwhile.
func (d *Driver) dropFile(ctx context.Context, path string, now time.Time, st *datastore.DropStats) error {
	return d.dropFileIf(ctx, path, nil, now, st)
}

// dropFileIf is dropFile of path's entry only while it is the change want
// (any change if want is nil).
func (d *Driver) dropFileIf(ctx context.Context, path string, want *indexEntry, now time.Time, st *datastore.DropStats) error {
	for attempt := 0; ; attempt++ {
		e, etag, err := d.readIndex(ctx, path)
		if err != nil || e == nil {
			return err
		}
		if want != nil && (e.Pos != want.Pos || e.Version != want.Version || e.Deleted != want.Deleted) {
			return nil
		}
		if !e.Deleted {
			if err := d.markReplaced(ctx, path, e.Version, e.Chunks, now); err != nil {
				return err
			}
		}
		err = d.c.deleteIf(ctx, d.fileKey(path), etag)
		if errors.Is(err, metastore.ErrConflict) && attempt < maxConflictRetries {
			if berr := backoff(ctx, attempt); berr != nil {
				return berr
			}
			continue
		}
		if err != nil {
			return err
		}
		if e.Deleted {
			st.Tombstones++
		} else {
			st.Files++
		}
		return nil
	}
}

// dropHead deletes part's head as it is now; if it changes under the delete
// the next pass of DropPartition finds it and tries again.
func (d *Driver) dropHead(ctx context.Context, part string) error {
	_, etag, ok, err := d.readHead(ctx, part)
	if err != nil || !ok {
		return err
	}
	if err := d.c.deleteIf(ctx, d.headKey(part), etag); err != nil && !errors.Is(err, metastore.ErrConflict) {
		return err
	}
	return nil
}

package s3fs

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
	"golang.org/x/sync/errgroup"
)

// maxDropPasses bounds the passes of DropPartition: a pass that finds the
// partition still holding something (a commit landed while it was being
// removed) is followed by another.
const maxDropPasses = 4

// DropPartition implements datastore.Driver. S3 has no multi-object write,
// so a drop is a sequence of conditional requests in an order that a crash
// may interrupt anywhere and a second call finishes:
//
//  1. the log's last object names no newer token of the fence's lock
//     (else a fence conflict);
//  2. the log rolled forward, so that the path index names every live
//     version (and marks the versions the pending changes replaced);
//  3. the fence, as a commit checks it, right before the first removal:
//     the lock record holds the fence's bytes (read once, here, since
//     issue 31: what comes before it any reader may do);
//  4. each index entry of the partition's paths (f/PATH~, tombstones
//     included): a live one's version marked replaced at now (q/NOW/VERSION
//     and v/VERSION, for Reclaim), then the entry deleted, 16 at once;
//  5. each log object, 16 at once;
//  6. the head, which is the registry entry and what ChangedPartitions
//     compares: last, so that a partly dropped partition is still listed
//     and a retry finds it.
//
// Every removal is a DeleteObject with If-Match on the ETag read (the
// head's: as the drop read or wrote it, without a read again). Then the
// partition is read again, and a pass repeats while it holds anything: a
// commit that read the partition's tail before the drop and created its
// log object during it is dropped too. One that lands after the last pass
// is left without a head (see docs/s3.md, "Dropping a partition").
func (d *Driver) DropPartition(ctx context.Context, fence *datastore.Fence, part string, now time.Time) (datastore.DropStats, error) {
	st, _, err := d.drop(ctx, fence, part, "", now)
	return st, err
}

var _ datastore.GuardedDropper = (*Driver)(nil)

// DropPartitionIfDeleted implements datastore.GuardedDropper: guard's
// index entry is read after the first pass's roll-forward (which puts
// every change of the log in the index) and before anything is removed;
// the read is the one its removal needs (its ETag, its version).
//
// A commit ctx offers (datastore.WithCommitRider: the lifecycle's removal
// of the model's catalog row) is carried after a drop that removed the
// partition, fenced by the drop's check (follow.go): no read of the lock
// record of its own.
func (d *Driver) DropPartitionIfDeleted(ctx context.Context, fence *datastore.Fence, part, guard string, now time.Time) (datastore.DropStats, bool, error) {
	st, dropped, err := d.drop(ctx, fence, part, guard, now)
	if err == nil && dropped {
		d.carry(ctx, fence, datastore.CommitRiderOf(ctx))
	}
	return st, dropped, err
}

// drop is DropPartition, unless guard ("": none) is a live file of part
// when its first pass reads it: then it removes nothing and dropped is
// false.
func (d *Driver) drop(ctx context.Context, fence *datastore.Fence, part, guard string, now time.Time) (st datastore.DropStats, dropped bool, err error) {
	// The head this process's last commit to part wrote, or its Stat read,
	// a moment ago (handoff.go): the first pass starts from it instead of
	// reading it (dropTail). Taken, so that no commit starts from a tail
	// of the log that goes.
	known, _ := d.c.handoff.Take(d.prefix + part)
	// The lock record is read right before the first removal (or write),
	// not also first (issue 31: one GET a drop): what comes before it,
	// the reads and the roll-forward, any reader may do.
	ft := parseFence(fence)
	checked, marked := false, false
	// check reads the lock record unless this pass did (again, if
	// again), then drops the compaction mark once: the log goes, and so
	// does what compaction remembers of it (the mark would not be
	// trusted for a new log anyway, see compact).
	check := func(again bool) error {
		if fence != nil && (again || !checked) {
			if _, err := d.checkFence(ctx, fence); err != nil {
				return err
			}
			checked = true
		}
		if !marked {
			if err := d.dropMark(ctx, part); err != nil {
				return err
			}
			marked = true
		}
		return nil
	}
	// From the second pass on, which normally finds the partition empty,
	// the heads that hold the model's claims are read before its head, so
	// that forgetting the claims needs no read of that head again
	// (forgetOffered; issue 31).
	var hosts []heldClaim
	for pass := 0; pass < maxDropPasses; pass++ {
		if pass > 0 {
			hosts = d.claimHosts(ctx, part, true)
		}
		t, logs, err := d.dropTail(ctx, part, known)
		known = nil
		if err != nil {
			return st, false, err
		}
		if ft != nil && ft.Token != 0 && t.last != nil && t.last.Fences[ft.Key] > ft.Token {
			// A newer holder fenced this log (a conflict), or no holder
			// wrote that value (ignored, see newerFence).
			if err := d.newerFence(ctx, fence); err != nil {
				return st, false, err
			}
		}
		if t.exists {
			if err := d.rollForward(ctx, part, t, now); err != nil {
				return st, false, err
			}
		}
		files, err := d.partitionFiles(ctx, part)
		if err != nil {
			return st, false, err
		}
		if !t.exists && len(logs) == 0 && len(files) == 0 {
			if err := check(false); err != nil {
				return st, false, err
			}
			if pass > 0 {
				d.forgetOffered(ctx, part, hosts) // claims.go
			} else {
				d.forgetClaims(ctx, part)
			}
			return st, true, nil
		}
		if t.exists && t.h.Indexed {
			// The index is the head's (headindex.go): the guard is read
			// there, and the entries go with the head.
			if guard != "" && pass == 0 {
				if live, err := d.headGuardLive(ctx, part, t, guard); err != nil || live {
					return st, false, err
				}
			}
			if err := check(true); err != nil { // right before each pass's removals
				return st, false, err
			}
			// Index objects of an Indexed partition are no entries (a
			// spill cut short, a foreign writer's): removed, not counted.
			var leftover datastore.DropStats
			if err := d.dropFiles(ctx, pathsOf(files), nil, now, &leftover); err != nil {
				return st, false, err
			}
			if err := d.dropLogs(ctx, logs); err != nil {
				return st, false, err
			}
			if err := d.dropIndexedHead(ctx, part, t, now, &st); err != nil {
				return st, false, err
			}
			continue
		}
		read := d.knownEntries(ctx, part, t.h, logs, files) // dropknown.go
		if guard != "" && pass == 0 {
			r, ok := read[guard]
			if !ok {
				e, etag, err := d.readIndex(ctx, guard)
				if err != nil {
					return st, false, err
				}
				r = readEntry{e, etag}
				read[guard] = r
			}
			if r.e != nil && !r.e.Deleted {
				return st, false, nil
			}
		}
		if err := check(true); err != nil { // right before each pass's removals
			return st, false, err
		}
		if err := d.dropFiles(ctx, pathsOf(files), read, now, &st); err != nil {
			return st, false, err
		}
		if err := d.dropLogs(ctx, logs); err != nil {
			return st, false, err
		}
		if err := d.dropHead(ctx, part, headETag(t)); err != nil {
			return st, false, err
		}
	}
	return st, false, metastore.Conflict(d.headKey(part), "the partition was written to throughout its drop; drop it again")
}

// dropTail reads part's head and lists its whole log, what a drop pass
// starts with, and returns the writer's tail they make and the listing:
// when the head holds the fences of the object it ends at and no object
// listed lies after it (a partition rolled forward, as a drop nearly
// always finds it), the listing stands for the tail's LIST of the objects
// after the head (issue 31: one LIST a drop fewer); otherwise the tail is
// read as readTail reads it. A commit that lands after the listing is the
// next pass's, as one that lands after a tail read.
//
// known, if not nil, is part's tail as this process's last commit wrote it
// or its Stat read it (handoff.go): when it is a head that holds its
// fences, the listing is made without reading the head first (issue 31:
// the delete sync of the seed's loop dropped the model whose head its
// commit had just written, one GET). It is a guess the listing checks: an
// object past its watermark reads the head after all. A head that moved
// without a new object (a reclaim raising its floor, a repair) costs what
// a head read between a drop's listing and its removals costs: its
// conditional delete fails and reads it (dropHead). A newer holder's fence
// entry is an object past it while listed, and rolled forward or
// compacted the lock record read before the removals refuses the drop.
func (d *Driver) dropTail(ctx context.Context, part string, known *tail) (*tail, []listed, error) {
	var h head
	var etag string
	ok := false
	if known != nil && known.exists && known.hetag != "" && known.h.knownFences() {
		h, etag, ok = known.h, known.hetag, true
	} else {
		known = nil
		var err error
		if h, etag, ok, err = d.readHead(ctx, part); err != nil {
			return nil, nil, err
		}
	}
	logs, err := d.c.listAll(ctx, d.logPrefix(part), "")
	if err != nil {
		return nil, nil, err
	}
	past := slices.ContainsFunc(logs, func(k listed) bool {
		pos, isPos := d.posOf(part, k.key)
		return isPos && pos > h.Applied
	})
	if ok && h.knownFences() && !past {
		return writerTail(&tail{h: h, hetag: etag, exists: true}), logs, nil
	}
	if known != nil {
		// The head the process knew is behind the log: read it.
		if h, etag, ok, err = d.readHead(ctx, part); err != nil {
			return nil, nil, err
		}
	}
	t, err := d.tailOf(ctx, part, h, etag, ok, true)
	return t, logs, err
}

// dropParallel bounds the removals of one step of a drop sent at once (the
// index entries, then the log objects): each is its own object, removed by
// its own conditional delete, and none waits for another's answer, so a
// drop of k files waits about k/16 round trips a step, not k. The steps
// stay in order (the head last), and a drop cut short anywhere leaves what
// a second call finishes, as before.
const dropParallel = 16

// readEntry is an index entry and its ETag as a read returned them (nil:
// absent).
type readEntry struct {
	e    *indexEntry
	etag string
}

// dropFiles is dropFile of each of paths, dropParallel at once, taking
// the first read of those in read from it; st counts those that went,
// whatever fails.
func (d *Driver) dropFiles(ctx context.Context, paths []string, read map[string]readEntry, now time.Time, st *datastore.DropStats) error {
	var mu sync.Mutex
	return untilFailure(len(paths), func(i int) error {
		var one datastore.DropStats
		var err error
		if r, ok := read[paths[i]]; ok {
			err = d.dropRead(ctx, paths[i], nil, r, now, &one)
		} else {
			err = d.dropFile(ctx, paths[i], now, &one)
		}
		mu.Lock()
		st.Files += one.Files
		st.Tombstones += one.Tombstones
		mu.Unlock()
		return err
	})
}

// dropLogs deletes the log objects keys, each if it is still the one
// listed, dropParallel at once.
func (d *Driver) dropLogs(ctx context.Context, keys []listed) error {
	return untilFailure(len(keys), func(i int) error {
		if err := d.c.deleteIf(ctx, keys[i].key, keys[i].etag); err != nil && !errors.Is(err, metastore.ErrConflict) {
			return err
		}
		return nil
	})
}

// untilFailure calls f(0) to f(n-1), dropParallel at once, and returns
// the first error. After a failure no more calls start, but those in
// flight finish (their context is not canceled), so that what they
// removed is counted: a second drop counts the rest.
func untilFailure(n int, f func(i int) error) error {
	var failed atomic.Bool
	var g errgroup.Group
	g.SetLimit(dropParallel)
	for i := range n {
		g.Go(func() error {
			if failed.Load() {
				return nil
			}
			err := f(i)
			if err != nil {
				failed.Store(true)
			}
			return err
		})
	}
	return g.Wait()
}

// partitionFiles returns the paths of part that have an index entry, with
// their ETags: a LIST of the index under the partition's path prefix
// (which, for the partition "data", also holds the models' paths, filtered
// out).
func (d *Driver) partitionFiles(ctx context.Context, part string) ([]fileListed, error) {
	dir := d.prefix + "f/"
	keys, err := d.c.listAll(ctx, dir+escape(datastore.PartitionPrefix(part)), "")
	if err != nil {
		return nil, err
	}
	var out []fileListed
	for _, k := range keys {
		if p := unleaf(trimPrefix(k.key, dir)); d.partition(p) == part {
			out = append(out, fileListed{p, k.etag})
		}
	}
	return out, nil
}

func pathsOf(files []fileListed) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.path
	}
	return out
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
	e, etag, err := d.readIndex(ctx, path)
	if err != nil {
		return err
	}
	return d.dropRead(ctx, path, want, readEntry{e, etag}, now, st)
}

// dropRead is dropFileIf with path's entry first as r says, read again
// after a conflict.
func (d *Driver) dropRead(ctx context.Context, path string, want *indexEntry, r readEntry, now time.Time, st *datastore.DropStats) error {
	e, etag := r.e, r.etag
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			var err error
			if e, etag, err = d.readIndex(ctx, path); err != nil {
				return err
			}
		}
		if e == nil {
			return nil
		}
		if want != nil && (e.Pos != want.Pos || e.Version != want.Version || e.Deleted != want.Deleted) {
			return nil
		}
		if !e.Deleted {
			if err := d.markReplaced(ctx, path, e.Version, e.Chunks, now); err != nil {
				return err
			}
		}
		err := d.c.deleteIf(ctx, d.fileKey(path), etag)
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

// headETag is the ETag of t's head as its reader last read or wrote it
// (its roll-forward's write), or "" if that is not known (a write after a
// lost race).
func headETag(t *tail) string {
	_, etag, _ := rolledKnown(t)
	return etag
}

// rolledKnown returns the head t's roll-forward left, when it is known
// without a read: the one it wrote, or the one t read when it wrote none.
func rolledKnown(t *tail) (head, string, bool) {
	switch {
	case !t.exists:
		return head{}, "", false
	case t.rolled != "":
		return t.rolledHead, t.rolled, true
	case t.last == nil || t.h.Applied >= t.rollTo():
		return t.h, t.hetag, true // the roll-forward wrote nothing
	}
	return head{}, "", false
}

// rolledHead returns part's head as t's roll-forward left it
// (rolledKnown), or as read now.
func (d *Driver) rolledHead(ctx context.Context, part string, t *tail) (head, string, bool, error) {
	if h, etag, ok := rolledKnown(t); ok {
		return h, etag, true, nil
	}
	return d.readHead(ctx, part)
}

// headGuardLive reports whether guard is a live file in the index of part's
// Indexed head as t's roll-forward left it.
func (d *Driver) headGuardLive(ctx context.Context, part string, t *tail, guard string) (bool, error) {
	h, _, ok, err := d.rolledHead(ctx, part, t)
	if err != nil || !ok || !h.Indexed {
		return false, err
	}
	e, err := d.headEntry(part, h, guard)
	return e != nil && !e.Deleted, err
}

// dropIndexedHead deletes part's Indexed head, the partition's index with
// it: first each live version it names is handed to Reclaim (markReplaced,
// as the drop of an index object does), then the head is deleted under
// If-Match, and its entries counted in st once it is gone. A head that
// changed meanwhile (a commit landed and rolled forward) is read and done
// again; one gone is the next pass's to find.
func (d *Driver) dropIndexedHead(ctx context.Context, part string, t *tail, now time.Time, st *datastore.DropStats) error {
	h, etag, ok, err := d.rolledHead(ctx, part, t)
	for attempt := 0; ; attempt++ {
		if err != nil || !ok {
			return err
		}
		for path, e := range h.Files {
			if !e.Deleted {
				if err := d.markReplaced(ctx, path, e.Version, e.Chunks, now); err != nil {
					return err
				}
			}
		}
		err = d.c.deleteIf(ctx, d.headKey(part), etag)
		if err == nil {
			for _, e := range h.Files {
				if e.Deleted {
					st.Tombstones++
				} else {
					st.Files++
				}
			}
			return nil
		}
		if !errors.Is(err, metastore.ErrConflict) || attempt >= maxConflictRetries {
			return err
		}
		if berr := backoff(ctx, attempt); berr != nil {
			return berr
		}
		h, etag, ok, err = d.readHead(ctx, part)
	}
}

// dropHead deletes part's head as it is now: if known (its ETag as this
// drop last read or wrote it) still names it, with no read (issue 31),
// else as read now; if it changes under the delete the next pass of
// DropPartition finds it and tries again.
func (d *Driver) dropHead(ctx context.Context, part, known string) error {
	if known != "" {
		err := d.c.deleteIf(ctx, d.headKey(part), known)
		if err == nil || !errors.Is(err, metastore.ErrConflict) {
			return err
		}
	}
	_, etag, ok, err := d.readHead(ctx, part)
	if err != nil || !ok {
		return err
	}
	if err := d.c.deleteIf(ctx, d.headKey(part), etag); err != nil && !errors.Is(err, metastore.ErrConflict) {
		return err
	}
	return nil
}

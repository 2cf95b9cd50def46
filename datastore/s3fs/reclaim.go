package s3fs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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
	if err := d.settlePendingAt(ctx, now); err != nil {
		return st, err
	}
	if err := d.reclaimUploads(ctx, now, o.UploadGrace, &st); err != nil {
		return st, err
	}
	if err := d.reclaimVersions(ctx, now, o.Grace, &st); err != nil {
		return st, err
	}
	parts, err := d.listPartitions(ctx, true) // claims' logs are compacted too
	if err != nil {
		return st, err
	}
	var damaged error
	for _, part := range parts {
		err := d.compact(ctx, part, now, o, &st)
		if errors.Is(err, datastore.ErrDamaged) {
			// One damaged partition does not stop the reclaim of the
			// others; it is reported at the end.
			damaged = cmp.Or(damaged, err)
			continue
		}
		if err != nil {
			return st, err
		}
	}
	return st, damaged
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

// timeKeyLayout names a time in a key so that keys sort as times do (UTC,
// fixed width): intents and replaced-version markers are named by time, so
// Reclaim lists only those that are due.
const timeKeyLayout = "20060102T150405.000000000Z"

func timeKey(t time.Time) string { return t.UTC().Format(timeKeyLayout) }

// timedVersion splits TIME/VERSION, the rest of an intent's or a marker's
// key below its prefix.
func timedVersion(rest string) (time.Time, string, bool) {
	ts, version, ok := strings.Cut(rest, "/")
	if !ok || version == "" || strings.Contains(version, "/") {
		return time.Time{}, "", false
	}
	t, err := time.Parse(timeKeyLayout, ts)
	return t, version, err == nil
}

// reclaimUploads deletes the chunks of the uploads started more than grace
// ago and never committed: only those intents are listed (u/ is ordered by
// start time). An intent whose version is its path's, or was and has been
// replaced since (its v/ marker exists), leaves the chunks to the file or
// to the marker; either way the intent goes.
func (d *Driver) reclaimUploads(ctx context.Context, now time.Time, grace time.Duration, st *datastore.ReclaimStats) error {
	keys, err := d.c.listBefore(ctx, d.prefix+"u/", d.prefix+"u/"+timeKey(now.Add(-grace)))
	if err != nil {
		return err
	}
	for _, k := range keys {
		started, version, ok := timedVersion(trimPrefix(k.key, d.prefix+"u/"))
		if !ok {
			continue // not an intent: lake data check reports it, reclaim goes on
		}
		if now.Sub(started) <= grace {
			continue
		}
		o, err := d.c.get(ctx, k.key)
		if errors.Is(err, metastore.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		var u upload
		if err := json.Unmarshal(o.body, &u); err != nil || datastore.ValidatePath(u.Path) != nil {
			continue // not an intent: lake data check reports it, reclaim goes on
		}
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

// reclaimVersions deletes the chunks and the markers of the versions
// replaced more than grace ago. Only the due queue's entries up to now
// minus grace are listed (q/ is ordered by replacement time), so a reclaim
// run often, as the lifecycle's is, costs what is due, not every version
// replaced within the grace period.
func (d *Driver) reclaimVersions(ctx context.Context, now time.Time, grace time.Duration, st *datastore.ReclaimStats) error {
	keys, err := d.c.listBefore(ctx, d.prefix+"q/", d.prefix+"q/"+timeKey(now.Add(-grace)))
	if err != nil {
		return err
	}
	for _, k := range keys {
		at, version, ok := timedVersion(trimPrefix(k.key, d.prefix+"q/"))
		if !ok {
			continue // not a due-queue entry: lake data check reports it
		}
		if now.Sub(at) <= grace {
			continue
		}
		switch live, err := d.stillLive(ctx, k.key, version); {
		case err != nil:
			return err
		case live:
			// A claim that the version was replaced while its path's
			// index entry still names it (written by another client, or
			// an index not yet rolled forward): its chunks are a live
			// file's. The entry stays, checked again by the next reclaim.
			st.LiveKept++
			continue
		}
		n, err := d.deleteChunks(ctx, version)
		if err != nil {
			return err
		}
		if o, err := d.c.head(ctx, d.replacedKey(version)); err == nil {
			if err := d.c.deleteIf(ctx, d.replacedKey(version), o.etag); err != nil && !errors.Is(err, metastore.ErrConflict) {
				return err
			}
		} else if !errors.Is(err, metastore.ErrNotFound) {
			return err
		}
		if err := d.c.deleteIf(ctx, k.key, k.etag); err != nil && !errors.Is(err, metastore.ErrConflict) {
			return err
		}
		st.Versions++
		st.Chunks += n
	}
	return nil
}

// stillLive reports whether the version a due-queue entry (key) names is
// still its path's current version by the path's index entry. The path
// comes from the entry, else from the version's marker; an entry that names
// no path and has no marker was not written by lake (markReplaced writes
// both with the path; entries from before the path was recorded have a
// marker), so it is treated as live and kept: chunks are only ever deleted
// for a version some path held and no longer holds.
func (d *Driver) stillLive(ctx context.Context, key, version string) (bool, error) {
	path := ""
	for _, k := range []string{key, d.replacedKey(version)} {
		o, err := d.c.get(ctx, k)
		if errors.Is(err, metastore.ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		var r replaced
		if json.Unmarshal(o.body, &r) != nil {
			continue
		}
		if r.Path == "" && k == d.replacedKey(version) {
			return false, nil // written before paths were recorded: as before
		}
		if r.Path != "" && datastore.ValidatePath(r.Path) == nil {
			path = r.Path
			break
		}
	}
	if path == "" {
		return true, nil
	}
	e, err := d.currentEntry(ctx, path)
	if errors.Is(err, datastore.ErrDamaged) {
		return true, nil // lake data check reports it; keep the chunks
	}
	if err != nil {
		return false, err
	}
	return e != nil && !e.Deleted && e.Version == version, nil
}

// examinedMark is how far compact has read a log: every object up to the
// one named Key (stamped Mod by the store, so that a log dropped and
// started again is not mistaken for it), which ends at Pos; Pending are
// the tombstones it read there that were not yet past the horizon (or that
// changed under the purge), to purge when due without reading their
// objects again.
//
// NB: a stored format (k/PARTITION, mark.go); the JSON names must not change.
type examinedMark struct {
	Pos     uint64             `json:"pos"`
	Key     string             `json:"key"`
	Mod     time.Time          `json:"mod"`
	Pending []pendingTombstone `json:"pending,omitempty"`
}

// pendingTombstone is a path's deletion at log position Pos, made at Time.
type pendingTombstone struct {
	Path string    `json:"path"`
	Pos  uint64    `json:"pos"`
	Time time.Time `json:"time"`
}

// compact rolls part forward, purges its tombstones past the horizon
// (raising its floor) and deletes its dead log objects. An object younger
// than the grace period cannot be deleted yet: once compact has read it,
// it remembers (in this process) how far it read and the tombstones it
// found there not yet past the horizon, and reads no such object again
// until it is older than the grace period, purging those tombstones when
// due. So a reclaim run every few seconds (the lifecycle's) reads the new
// objects, the old live ones and the due tombstones' index entries, not
// every commit of the last hour; it lists the log's keys.
func (d *Driver) compact(ctx context.Context, part string, now time.Time, o datastore.ReclaimOptions, st *datastore.ReclaimStats) error {
	t, err := d.readTail(ctx, part, false)
	if err != nil || !t.exists {
		return err
	}
	if err := d.rollForward(ctx, part, t, now); err != nil {
		return err
	}
	stored, markETag, err := d.loadMark(ctx, part)
	if err != nil {
		return err
	}
	keys, err := d.compactionKeys(ctx, part, stored, o.Grace)
	if err != nil {
		return err
	}
	// Only position keys: the log's last object (kept below) is the last
	// of them, whatever foreign key sorts after it.
	keys = d.positions(part, keys)
	mark := examinedMark{}
	// Trust the mark only if its object is still the one it read.
	if i := slices.IndexFunc(keys, func(k listed) bool { return k.key == stored.Key }); stored.Key != "" && i >= 0 && keys[i].mod.Equal(stored.Mod) {
		mark = stored
	}
	next := examinedMark{Pos: mark.Pos, Key: mark.Key, Mod: mark.Mod}
	// An Indexed head's entries are read from it as the roll-forward left
	// it, and its tombstones purged in its write that raises the floor
	// (headindex.go); the dead objects are found from it too, reading
	// none of them (deadByIndex). Otherwise each object is read and each
	// of its entries' index objects (deadByReading).
	var hx *head
	var hxETag string
	hxPurged := map[string]uint64{} // path → the tombstone's position
	if t.h.Indexed {
		h, etag, ok, err := d.rolledHead(ctx, part, t)
		if err != nil {
			return err
		}
		if ok && h.Indexed {
			h.Files = maps.Clone(h.Files)
			hx, hxETag = &h, etag
		}
	}
	floor := uint64(0)
	var deadKeys []listed // deleted once the floor is raised
	if hx != nil {
		deadKeys, err = d.deadByIndex(part, *hx, keys, t.rollTo(), now, o, hxPurged, &floor, &next)
	} else {
		deadKeys, err = d.deadByReading(ctx, part, keys, t.rollTo(), now, o, mark, &floor, &next, st)
	}
	if err != nil {
		return err
	}
	headWritten := false
	if hx != nil && len(hxPurged) > 0 {
		// The purge and the floor in one write of the head.
		n, err := d.purgeInHead(ctx, part, *hx, hxETag, hxPurged, floor)
		if err != nil {
			return err
		}
		st.Tombstones += n
		headWritten = true
	}
	d.saveMark(ctx, part, stored, markETag, next)
	// The floor first, then the dead objects: a reader whose feed read
	// finds an object gone reads the head after it (feedAfter's whole),
	// and must find the floor raised past a tombstone that object held.
	if !headWritten {
		if err := d.raiseFloor(ctx, part, floor); err != nil {
			return err
		}
	}
	for _, k := range deadKeys {
		if err := d.c.deleteIf(ctx, k.key, k.etag); err != nil && !errors.Is(err, metastore.ErrConflict) {
			return err
		}
	}
	return nil
}

// purgeInHead removes from part's Indexed head h (read with etag) the
// tombstones purged names (path → position), each only while it is still
// its path's entry, and raises its floor to floor, in one conditional
// write; a head that changed meanwhile (its partition's commits go on
// during a reclaim) is read again and the purge made over it, as
// raiseFloor does. It returns the tombstones removed. A head no longer
// Indexed (its index moved to f/ meanwhile) or gone is left to the next
// run, with its floor raised as raiseFloor raises it.
func (d *Driver) purgeInHead(ctx context.Context, part string, h head, etag string, purged map[string]uint64, floor uint64) (int, error) {
	for attempt := 0; ; attempt++ {
		if attempt == maxCommitAttempts {
			return 0, fmt.Errorf("%w: s3 head %q: it changed under each of %d purges", metastore.ErrUnavailable, d.headKey(part), attempt)
		}
		if !h.Indexed {
			return 0, d.raiseFloor(ctx, part, floor)
		}
		files := maps.Clone(h.Files)
		n := 0
		for path, pos := range purged {
			if e, ok := files[path]; ok && e.Pos == pos && e.Deleted {
				delete(files, path)
				n++
			}
		}
		h.Files = files
		h.Floor = max(h.Floor, floor)
		_, err := d.replaceHead(ctx, part, etag, h)
		if err == nil {
			return n, nil
		}
		if !errors.Is(err, metastore.ErrConflict) {
			return 0, err
		}
		if err := backoff(ctx, attempt); err != nil {
			return 0, err
		}
		var ok bool
		if h, etag, ok, err = d.readHead(ctx, part); err != nil || !ok {
			return 0, err
		}
	}
}

// compactPage is the page in which compactionKeys lists a log's start: a
// reclaim every few seconds finds there the objects that grew older than
// the grace period since the last one, and stops at the first younger one.
const compactPage = 64

// compactionKeys lists what compact reads of part's log (issue 31). With
// a mark (stored) it lists the log from its start only while the objects
// are older than grace (the ones compact may delete), a page of
// compactPage at a time, then from the mark's object on (the mark, then
// the objects compact has not read): the objects between, which an
// earlier compact read and which are too young to delete, are not listed.
// A reclaim every few seconds (the lifecycle's) so lists what changed
// since the last one, not the last hour of the log's commits. A log that
// fits the first page, or a mark whose object is not the one it read
// (compact then trusts it no more), is listed whole, as without a mark.
func (d *Driver) compactionKeys(ctx context.Context, part string, stored examinedMark, grace time.Duration) ([]listed, error) {
	prefix := d.logPrefix(part)
	first, ok := d.posOf(part, stored.Key)
	if !ok {
		return d.c.listAll(ctx, prefix, "")
	}
	var keys []listed
	start := ""
	for {
		page, more, err := d.c.list(ctx, prefix, start, compactPage)
		if err != nil {
			return nil, err
		}
		for i, l := range page {
			if l.key < stored.Key && d.c.clock.now().Sub(l.mod) > grace {
				keys = append(keys, l)
				continue
			}
			if !more {
				return append(keys, page[i:]...), nil // the rest of the log
			}
			rest, err := d.c.listAll(ctx, prefix, d.logKey(part, first-1))
			if err != nil {
				return nil, err
			}
			if len(rest) == 0 || rest[0].key != stored.Key || !rest[0].mod.Equal(stored.Mod) {
				return d.c.listAll(ctx, prefix, "") // not the mark's object: read whole
			}
			return append(keys, rest...), nil
		}
		if !more || len(page) == 0 {
			return keys, nil
		}
		start = page[len(page)-1].key
	}
}

func (d *Driver) raiseFloor(ctx context.Context, part string, floor uint64) error {
	for attempt := 0; ; attempt++ {
		if attempt == maxCommitAttempts {
			return fmt.Errorf("%w: s3 head %q: its floor changed under each of %d writes", metastore.ErrUnavailable, d.headKey(part), attempt)
		}
		h, etag, ok, err := d.readHead(ctx, part)
		if err != nil || !ok || h.Floor >= floor {
			return err
		}
		h.Floor = floor
		_, err = d.replaceHead(ctx, part, etag, h)
		if !errors.Is(err, metastore.ErrConflict) {
			return err
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
}

// deadByReading is compact's pass over the log keys (position keys, in
// order) of a partition whose index is in f/, as the roll-forward left it
// at rollTo: each object not handled yet is read, and each of its entries'
// index objects, once; an object is dead when none of its entries is its
// path's entry. A tombstone past the horizon is purged (its index object
// deleted, *floor raised to it); one not yet, in an object too young to
// delete, is kept in next.Pending with next's position past that object,
// so that the next run purges it when due without reading the object
// again (mark: what the last run handled). It returns the dead objects
// that are past the grace period, never the log's last.
func (d *Driver) deadByReading(ctx context.Context, part string, keys []listed, rollTo uint64, now time.Time, o datastore.ReclaimOptions, mark examinedMark, floor *uint64, next *examinedMark, st *datastore.ReclaimStats) ([]listed, error) {
	type idx struct {
		e    *indexEntry
		etag string
	}
	index := map[string]idx{}
	readEntry := func(path string) (idx, error) {
		ie, etag, err := d.readIndex(ctx, path)
		return idx{ie, etag}, err
	}
	var deadKeys []listed
	// purge deletes path's tombstone at pos if it is still the path's
	// latest change; false if it changed meanwhile (left to the next run).
	purge := func(path string, pos uint64) (bool, error) {
		cur, ok := index[path]
		if !ok {
			var err error
			if cur, err = readEntry(path); err != nil {
				return false, err
			}
			index[path] = cur
		}
		if cur.e == nil || cur.e.Pos != pos || !cur.e.Deleted {
			return true, nil // superseded, or purged already
		}
		err := d.c.deleteIf(ctx, d.fileKey(path), cur.etag)
		if errors.Is(err, metastore.ErrConflict) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		index[path] = idx{}
		st.Tombstones++
		*floor = max(*floor, pos)
		return true, nil
	}
	for _, p := range mark.Pending {
		if now.Sub(p.Time) <= o.Horizon {
			next.Pending = append(next.Pending, p)
			continue
		}
		if done, err := purge(p.Path, p.Pos); err != nil {
			return nil, err
		} else if !done {
			next.Pending = append(next.Pending, p)
		}
	}
	for i, k := range keys {
		old := d.c.clock.now().Sub(k.mod) > o.Grace // by S3's clock
		pos, _ := d.posOf(part, k.key)
		if pos > rollTo {
			break // a staged commit not yet decided, and what follows it (whole.go)
		}
		if !old && mark.Pos > 0 && pos <= mark.Pos {
			continue // handled, and not deletable yet
		}
		obj, err := d.readLog(ctx, part, k.key, pos)
		if errors.Is(err, metastore.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		dead := true
		for j, e := range obj.Entries {
			pos := obj.First + uint64(j)
			cur, ok := index[e.Path]
			if !ok {
				var err error
				if cur, err = readEntry(e.Path); err != nil {
					return nil, err
				}
				index[e.Path] = cur
			}
			if cur.e == nil || cur.e.Pos != pos {
				continue // superseded (or its tombstone purged)
			}
			if cur.e.Deleted {
				if now.Sub(cur.e.Time) > o.Horizon {
					done, err := purge(e.Path, pos)
					if err != nil {
						return nil, err
					}
					if done {
						continue
					}
				}
				if !old && pos > mark.Pos {
					next.Pending = append(next.Pending, pendingTombstone{Path: e.Path, Pos: pos, Time: cur.e.Time})
				}
			}
			dead = false
		}
		if !old && obj.last() > next.Pos {
			next.Pos, next.Key, next.Mod = obj.last(), k.key, k.mod
		}
		last := i == len(keys)-1
		if dead && !last && old {
			deadKeys = append(deadKeys, k)
		}
	}
	return deadKeys, nil
}

// deadByIndex is compact's pass over the log keys (position keys, in
// order) of a partition whose head h holds its index, as the roll-forward
// left it at rollTo: every path's latest change is an entry of h, so an
// object is dead when no entry's position lies in its run of positions,
// which the next key's position bounds (a run bounded so may be taken
// too long, never too short: an object is kept, never lost). No object
// is read (issue 31: the seed's loop read each new object of every
// catalog partition in its reclaims). The tombstones past the horizon go
// into purged (removed from h in the write that raises the floor to
// *floor); next, the mark, moves past the young objects, which only
// bounds what the next reclaim lists (compactionKeys), as it would after
// reading them. It returns the dead objects that are past the grace
// period, never the log's last.
func (d *Driver) deadByIndex(part string, h head, keys []listed, rollTo uint64, now time.Time, o datastore.ReclaimOptions, purged map[string]uint64, floor *uint64, next *examinedMark) ([]listed, error) {
	var live []uint64
	for path := range h.Files {
		e, err := d.headEntry(part, h, path)
		if err != nil {
			return nil, err
		}
		if e.Deleted && now.Sub(e.Time) > o.Horizon {
			purged[path] = e.Pos
			*floor = max(*floor, e.Pos)
			continue
		}
		live = append(live, e.Pos)
	}
	slices.Sort(live)
	var dead []listed
	for i, k := range keys {
		pos, _ := d.posOf(part, k.key)
		if pos > rollTo {
			break // a staged commit not yet decided, and what follows it (whole.go)
		}
		end := rollTo // the run of the last object listed
		if i+1 < len(keys) {
			np, _ := d.posOf(part, keys[i+1].key)
			end = min(end, np-1)
		}
		if d.c.clock.now().Sub(k.mod) <= o.Grace { // by S3's clock
			if end > next.Pos {
				next.Pos, next.Key, next.Mod = end, k.key, k.mod
			}
			continue
		}
		if i == len(keys)-1 {
			break
		}
		j, _ := slices.BinarySearch(live, pos)
		if j < len(live) && live[j] <= end {
			continue
		}
		dead = append(dead, k)
	}
	return dead, nil
}

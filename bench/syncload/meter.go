package syncload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// meter is a worker's view of the datastore: a Driver that forwards every
// call to the shared driver and counts it (requests, items read and
// written, the time spent, by step and by key), and that carries the two
// bottlenecks that live at the driver's level: the seed's full read on
// every pull (PullFull) and the rewrite of the whole namespace index on
// every commit (CommitFull). Every worker has its own meter over the one
// shared driver, so the counts are the worker's own.
type meter struct {
	datastore.Driver
	cfg       Config
	namespace string
	// layout is the datastore's partition rule, for the keys of a commit
	// (the root meter's counts).
	layout datastore.Layout

	// full is the seed's one-partition index, when the store has one
	// (DynamoDB); nil means the full pull reads the datastore's listing.
	full FullIndex

	// parent is the worker's meter when this one is a namespace's (the
	// catalog scope, or the worker's namespace): its counts are the
	// parent's.
	parent *meter

	mu     sync.Mutex
	c      counts
	phase  string // "" (by call), "catalog" or "prune"
	lastAt time.Time
}

// root is the meter whose counts this one adds to.
func (m *meter) root() *meter {
	if m.parent != nil {
		return m.parent
	}
	return m
}

// Namespace meters the namespace's driver into the same counts, so that a
// worker's requests in its namespace and in the catalog are its own.
func (m *meter) Namespace(name string) (datastore.Driver, error) {
	r := m.root()
	d, err := r.Driver.Namespace(name)
	if err != nil {
		return nil, err
	}
	return aheadDriver(&meter{Driver: d, cfg: r.cfg, namespace: r.namespace, full: r.full, parent: r}), nil
}

// Unwrap implements datastore.DriverUnwrapper: the driver m counts for, so
// that a commit of one namespace carried by another's write
// (datastore.CommitRider: a DynamoDB drop carrying its catalog row's
// removal) is carried under the meter as without it.
func (m *meter) Unwrap() datastore.Driver { return m.Driver }

// DropPartition is the lifecycle's drop of a pruned model, counted as one
// request of the prune step; its requests to the store are the worker's,
// as every call's.
func (m *meter) DropPartition(ctx context.Context, fence *datastore.Fence, partition string, now time.Time) (datastore.DropStats, error) {
	t := time.Now()
	st, err := m.Driver.DropPartition(withTally(ctx, m), fence, partition, now)
	m.note("prune", t, st.Files+st.Tombstones, st.Files+st.Tombstones, partKey(partition))
	return st, err
}

// PrefetchCommit implements datastore.CommitPrefetcher: the driver's, if
// it has it (DynamoDB's); ctx as it is otherwise. It sends nothing: the
// next commit's read carries the keys.
func (m *meter) PrefetchCommit(ctx context.Context, paths []string) context.Context {
	if p, ok := m.Driver.(datastore.CommitPrefetcher); ok {
		return p.PrefetchCommit(ctx, paths)
	}
	return ctx
}

// DropPartitionIfDeleted implements datastore.GuardedDropper: the
// driver's, if it has it (DynamoDB's and S3's check the guard in the
// drop's own reads), counted as DropPartition is; over a driver without
// it, unsupported, at no request (the datastore reads the guard first).
func (m *meter) DropPartitionIfDeleted(ctx context.Context, fence *datastore.Fence, partition, guard string, now time.Time) (datastore.DropStats, bool, error) {
	gd, ok := m.Driver.(datastore.GuardedDropper)
	if !ok {
		return datastore.DropStats{}, false, errors.ErrUnsupported
	}
	t := time.Now()
	st, dropped, err := gd.DropPartitionIfDeleted(withTally(ctx, m), fence, partition, guard, now)
	written := st.Files + st.Tombstones
	if r := datastore.CommitRiderOf(ctx); r != nil {
		if _, ok := r.Carried(); ok {
			written += len(r.Entries()) // the catalog row's removal the drop carried
		}
	}
	m.note("prune", t, st.Files+st.Tombstones, written, partKey(partition))
	return st, dropped, err
}

// Reclaim is the lifecycle's periodic reclaim of the namespace (and of the
// catalog's scope), counted as one request of the prune step: its time is
// part of what expiring costs, and its requests to the store are the
// worker's.
func (m *meter) Reclaim(ctx context.Context, now time.Time, o datastore.ReclaimOptions) (datastore.ReclaimStats, error) {
	t := time.Now()
	st, err := m.Driver.Reclaim(withTally(ctx, m), now, o)
	n := st.Uploads + st.Versions + st.Tombstones
	m.note("prune", t, n, n, "reclaim")
	return st, err
}

// counts is what a worker's calls cost since the last take.
type counts struct {
	Requests, ItemsRead, ItemsWritten int64
	// IndexWritten counts the index entries the commits wrote (with
	// CommitFull, the whole namespace index each time).
	IndexWritten int64
	// Time by step: "pull", "push", "commit", "lock", "catalog", "prune".
	Time map[string]time.Duration
	// Keys counts the requests by the key they address: "f#PARTITION" for
	// a partition's feed and files, "list:PREFIX", "changed-partitions",
	// "rec:DIR" for records, "chunks".
	Keys map[string]int64
	// StoreKeys, StoreRequests and StoreItemsRead are the store's own
	// requests (DynamoDB's, S3's) under DynamoKeys or S3Keys: one a
	// request on the wire, the load by partition key or key prefix, and
	// the items the store read.
	StoreKeys                     map[string]int64
	StoreRequests, StoreItemsRead int64
}

func newCounts() counts {
	return counts{Time: map[string]time.Duration{}, Keys: map[string]int64{}, StoreKeys: map[string]int64{}}
}

func newMeter(d datastore.Driver, cfg Config, namespace string, full FullIndex) *meter {
	return &meter{Driver: d, cfg: cfg, namespace: namespace, full: full, c: newCounts()}
}

// fullPull reports whether pulls read everything (PullFull, PullFullFilter).
func (m *meter) fullPull() bool { return m.cfg.Pull == PullFull || m.cfg.Pull == PullFullFilter }

// take returns the counts since the last take and resets them.
func (m *meter) take() counts {
	m = m.root()
	m.root().mu.Lock()
	defer m.root().mu.Unlock()
	c := m.c
	m.c = newCounts()
	return c
}

// setPhase makes the calls that follow count for step p ("" for each
// call's own step) and returns the phase it replaces.
func (m *meter) setPhase(p string) string {
	m = m.root()
	m.root().mu.Lock()
	defer m.root().mu.Unlock()
	old := m.root().phase
	m.root().phase = p
	return old
}

// note records one request: its step (unless a phase claims it), how long
// it took, its items and its keys.
func (m *meter) note(step string, start time.Time, read, written int, keys ...string) {
	d := time.Since(start)
	m = m.root()
	m.root().mu.Lock()
	defer m.root().mu.Unlock()
	if m.root().phase != "" {
		step = m.root().phase
	}
	m.root().c.Requests++
	m.root().c.ItemsRead += int64(read)
	m.root().c.ItemsWritten += int64(written)
	m.root().c.Time[step] += d
	for _, k := range keys {
		m.root().c.Keys[k]++
	}
}

func partKey(p string) string { return "f#" + p }

func (m *meter) pathKeys(paths []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		k := partKey(m.root().layout.Partition(p))
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

func recKey(key string) string {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) >= 2 {
		return "rec:" + parts[0] + "/" + parts[1]
	}
	return "rec:" + key
}

// BeginUpload implements datastore.Driver.
func (m *meter) BeginUpload(ctx context.Context, s datastore.Staged) error {
	ctx = withTally(ctx, m)
	t := time.Now()
	err := m.Driver.BeginUpload(ctx, s)
	m.note("push", t, 0, 1, "uploads")
	return err
}

// PutChunk implements datastore.Driver.
func (m *meter) PutChunk(ctx context.Context, version string, i int, data []byte) error {
	ctx = withTally(ctx, m)
	t := time.Now()
	err := m.Driver.PutChunk(ctx, version, i, data)
	m.note("push", t, 0, 1, "chunks")
	return err
}

// GetChunk implements datastore.Driver.
func (m *meter) GetChunk(ctx context.Context, version string, i int) ([]byte, error) {
	ctx = withTally(ctx, m)
	t := time.Now()
	b, err := m.Driver.GetChunk(ctx, version, i)
	m.note("pull", t, 1, 0, "chunks")
	return b, err
}

// Commit implements datastore.Driver; with CommitFull, a successful fenced
// commit is followed by the rewrite of the namespace's whole index.
func (m *meter) Commit(ctx context.Context, fence *datastore.Fence, entries []datastore.Entry, now time.Time) ([]datastore.Info, error) {
	ctx = withTally(ctx, m)
	t := time.Now()
	out, err := m.Driver.Commit(ctx, fence, entries, now)
	paths := make([]string, len(entries))
	for i, e := range entries {
		paths[i] = e.Path()
	}
	// The catalog fold a commit carried (datastore.CommitFollower) was
	// written with it, not by a Commit of its own: its entries count here,
	// and so does a record write it carried (the fold cursor's,
	// datastore.WithRecordWrite or the fold's own), as CASRecord counts
	// one.
	carried := 0
	if r, ok := datastore.CommitFollowerOf(ctx).Carried(); ok {
		carried = len(r.Entries())
		if r.Record != nil && r.Record.Written() {
			carried++
		}
	}
	if w := datastore.RecordWriteOf(ctx); w != nil && w.Written() {
		carried++
	}
	m.note("commit", t, 0, len(entries)+carried, m.pathKeys(paths)...)
	if err != nil {
		return out, err
	}
	m.root().mu.Lock()
	m.root().c.IndexWritten += int64(len(entries))
	m.root().mu.Unlock()
	if m.full != nil && m.fullPull() {
		// The seed's index: an item per changed file in the one partition.
		t := time.Now()
		err := m.full.Record(ctx, paths, now)
		m.note("commit", t, 0, len(paths), "gsi:FILE")
		if err != nil {
			return out, fmt.Errorf("lake: write the seed's index: %w", err)
		}
	}
	if m.cfg.Commit == CommitFull && fence != nil {
		if err := m.rewriteIndex(ctx, *fence, entries); err != nil {
			return out, err
		}
	}
	return out, nil
}

// indexPrefix holds the namespace's index records under CommitFull: one
// record per live path of the namespace, value "PATH VERSION".
func (m *meter) indexPrefix() string { return "benchidx/" + m.namespace + "/" }

// rewriteIndex is the seed's coordinator's commit: read the namespace's
// whole index, apply the commit's entries, and write every entry back,
// each write fenced by the sync's lock.
func (m *meter) rewriteIndex(ctx context.Context, fence datastore.Fence, entries []datastore.Entry) error {
	prefix := m.indexPrefix()
	t := time.Now()
	items, err := m.Driver.ListRecords(ctx, prefix)
	m.note("commit", t, len(items), 0, recKey(prefix))
	if err != nil {
		return fmt.Errorf("lake: read the namespace index: %w", err)
	}
	old := make(map[string][]byte, len(items))
	for _, it := range items {
		old[it.Key] = it.Value
	}
	next := make(map[string][]byte, len(old)+len(entries))
	for k, v := range old {
		next[k] = v
	}
	for _, e := range entries {
		k := prefix + indexKey(e.Path())
		if e.Put != nil {
			next[k] = []byte(e.Put.Path + " " + e.Put.Version)
		} else {
			delete(next, k)
		}
	}
	for k, v := range next {
		expect := metastore.ExpectAbsent()
		if o, ok := old[k]; ok {
			expect = metastore.ExpectValue(o)
		}
		t := time.Now()
		err := m.Driver.FencedRecord(ctx, fence, k, expect, v)
		m.note("commit", t, 0, 1, recKey(prefix))
		if err != nil {
			return fmt.Errorf("lake: rewrite the namespace index: %w", err)
		}
	}
	for k, o := range old {
		if _, ok := next[k]; !ok {
			t := time.Now()
			err := m.Driver.DeleteRecord(ctx, k, o)
			m.note("commit", t, 0, 1, recKey(prefix))
			if err != nil {
				return fmt.Errorf("lake: rewrite the namespace index: %w", err)
			}
		}
	}
	m.root().mu.Lock()
	m.root().c.IndexWritten += int64(len(next))
	m.root().mu.Unlock()
	return nil
}

// indexKey turns a path into one record key segment.
func indexKey(p string) string {
	return strings.NewReplacer("/", "|", " ", "_").Replace(p)
}

// Stat implements datastore.Driver.
func (m *meter) Stat(ctx context.Context, paths []string) (map[string]datastore.Info, error) {
	ctx = withTally(ctx, m)
	t := time.Now()
	out, err := m.Driver.Stat(ctx, paths)
	m.note("push", t, len(out), 0, m.pathKeys(paths)...)
	return out, err
}

// List implements datastore.Driver.
func (m *meter) List(ctx context.Context, prefix string, limit int, pos []byte) ([]datastore.Info, []byte, error) {
	ctx = withTally(ctx, m)
	t := time.Now()
	files, next, err := m.Driver.List(ctx, prefix, limit, pos)
	m.note("pull", t, len(files), 0, "list:"+prefix)
	return files, next, err
}

// ListPartition implements datastore.PartitionLister: the driver's own
// when it has one (DynamoDB: one Query of the partition), else a listing of
// the partition's directory, which the Store filters to the partition.
func (m *meter) ListPartition(ctx context.Context, partition, prefix string, limit int, pos []byte) ([]datastore.Info, []byte, error) {
	pl, ok := m.Driver.(datastore.PartitionLister)
	if !ok {
		if prefix == "" {
			prefix = datastore.PartitionPrefix(partition)
		}
		return m.List(ctx, prefix, limit, pos)
	}
	ctx = withTally(ctx, m)
	t := time.Now()
	files, next, err := pl.ListPartition(ctx, partition, prefix, limit, pos)
	m.note("pull", t, len(files), 0, partKey(partition))
	return files, next, err
}

// Head implements datastore.Driver.
func (m *meter) Head(ctx context.Context, partition string) (datastore.Head, error) {
	ctx = withTally(ctx, m)
	t := time.Now()
	h, err := m.Driver.Head(ctx, partition)
	m.note("pull", t, 1, 0, partKey(partition))
	return h, err
}

// Changes implements datastore.Driver.
func (m *meter) Changes(ctx context.Context, partition string, after uint64, limit int) ([]datastore.Info, uint64, error) {
	ctx = withTally(ctx, m)
	t := time.Now()
	ch, upTo, err := m.Driver.Changes(ctx, partition, after, limit)
	m.note("pull", t, len(ch), 0, partKey(partition))
	return ch, upTo, err
}

// Partitions implements datastore.Driver.
func (m *meter) Partitions(ctx context.Context) ([]string, error) {
	ctx = withTally(ctx, m)
	t := time.Now()
	p, err := m.Driver.Partitions(ctx)
	m.note("pull", t, len(p), 0, "partitions")
	return p, err
}

// ChangedPartitions implements datastore.Driver. It is where an unscoped
// pull starts; with PullFull the pull first reads the whole listing, the
// seed's queryAllFileMeta, outside the catalog step.
func (m *meter) ChangedPartitions(ctx context.Context, cursor []byte) ([]datastore.Head, []byte, error) {
	ctx = withTally(ctx, m)
	m.root().mu.Lock()
	full := m.fullPull() && m.root().phase != "catalog"
	m.root().mu.Unlock()
	if full {
		if err := m.fullRead(ctx); err != nil {
			return nil, nil, err
		}
	}
	t := time.Now()
	h, next, err := m.Driver.ChangedPartitions(ctx, cursor)
	m.note("pull", t, len(h), 0, "changed-partitions")
	return h, next, err
}

// fullRead is the seed's queryAllFileMeta: with a FullIndex, its one
// partition read whole; otherwise every file of the datastore, page by
// page; either way filtered on the change time after the last full read
// (client-side, on the writer's clock, as the seed did). The changes
// themselves are then applied from the feed: the read is the seed's cost,
// paid in full.
func (m *meter) fullRead(ctx context.Context) error {
	since := m.root().lastAt
	m.root().lastAt = time.Now()
	if m.full != nil {
		t := time.Now()
		read, _, err := m.full.Pull(ctx, since, m.cfg.Pull == PullFullFilter)
		m.note("pull", t, int(read), 0, "gsi:FILE")
		if err != nil {
			return fmt.Errorf("lake: full pull: %w", err)
		}
		return nil
	}
	var pos []byte
	changed := 0
	for {
		files, next, err := m.List(ctx, "", 1000, pos)
		if err != nil {
			return fmt.Errorf("lake: full pull: %w", err)
		}
		for _, f := range files {
			if f.Time.After(since) {
				changed++
			}
		}
		if next == nil {
			return nil
		}
		pos = next
	}
}

// GetRecord implements datastore.Driver.
func (m *meter) GetRecord(ctx context.Context, key string) ([]byte, error) {
	ctx = withTally(ctx, m)
	t := time.Now()
	v, err := m.Driver.GetRecord(ctx, key)
	m.note("lock", t, 1, 0, recKey(key))
	return v, err
}

// CASRecord implements datastore.Driver.
func (m *meter) CASRecord(ctx context.Context, key string, expect metastore.Expect, value []byte) error {
	ctx = withTally(ctx, m)
	t := time.Now()
	err := m.Driver.CASRecord(ctx, key, expect, value)
	m.note("lock", t, 0, 1, recKey(key))
	return err
}

// DeleteRecord implements datastore.Driver.
func (m *meter) DeleteRecord(ctx context.Context, key string, expected []byte) error {
	ctx = withTally(ctx, m)
	t := time.Now()
	err := m.Driver.DeleteRecord(ctx, key, expected)
	m.note("lock", t, 0, 1, recKey(key))
	return err
}

// ListRecords implements datastore.Driver.
func (m *meter) ListRecords(ctx context.Context, prefix string) ([]metastore.Item, error) {
	ctx = withTally(ctx, m)
	t := time.Now()
	it, err := m.Driver.ListRecords(ctx, prefix)
	m.note("lock", t, len(it), 0, recKey(prefix))
	return it, err
}

// FencedRecord implements datastore.Driver.
func (m *meter) FencedRecord(ctx context.Context, fence datastore.Fence, key string, expect metastore.Expect, value []byte) error {
	ctx = withTally(ctx, m)
	t := time.Now()
	err := m.Driver.FencedRecord(ctx, fence, key, expect, value)
	m.note("lock", t, 0, 1, recKey(key))
	return err
}

// Close leaves the shared driver open: the run closes it.
func (m *meter) Close() error { return nil }

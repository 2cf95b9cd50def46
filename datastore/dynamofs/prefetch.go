package dynamofs

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/lakemeta/lake/datastore"
)

// A commit's read made by the commit before it (issue 31). A sync commits
// its files, then the catalog fold commits the rows of the models they
// changed, in another namespace of the same table: two commits, each a
// TransactGetItems of what it is about to write and a TransactWriteItems.
// The rows' paths are known before the first commit, and the fold's keys
// (the rows' items, the catalog partition's head and shard counter, what
// the clash checks read) are none of the items the first commit writes.
// So the first commit's TransactGetItems reads them too, in the same
// snapshot, and the fold's commit builds on that read instead of reading.
//
// Why an earlier read cannot make the fold's commit wrong: what makes a
// commit's read good is not its age but the conditions its write makes on
// it (snapshot.go): the heads' and counters' compare-and-swap, each new
// file's absence, each file's position. A commit that changed any of it
// between the read and the write moved a head or counter the write
// conditions on, and the write fails; commitOnceIfLayout then reads again
// (the prefetched read is used once). This is the read a fresh
// TransactGetItems would have made a moment earlier, and as whole.

// prefetchKey is the context key of the prefetches a context carries
// ([]*prefetch, the latest last): at most one of them counts for each
// namespace, the latest.
type prefetchKey struct{}

// prefetchesOf returns the prefetches ctx carries.
func prefetchesOf(ctx context.Context) []*prefetch {
	pfs, _ := ctx.Value(prefetchKey{}).([]*prefetch)
	return pfs
}

// withPrefetch returns ctx carrying pf besides its other prefetches, in
// place of any of pf's namespace.
func withPrefetch(ctx context.Context, pf *prefetch) context.Context {
	var next []*prefetch
	for _, o := range prefetchesOf(ctx) {
		if o.pfx != pf.pfx {
			next = append(next, o)
		}
	}
	return context.WithValue(ctx, prefetchKey{}, append(next, pf))
}

// prefetchFor returns ctx's prefetch of namespace pfx, if any.
func prefetchFor(ctx context.Context, pfx string) *prefetch {
	for _, pf := range prefetchesOf(ctx) {
		if pf.pfx == pfx {
			return pf
		}
	}
	return nil
}

// prefetch is a later commit's read, to be made by the next commit of
// another namespace.
type prefetch struct {
	pfx  string          // the later commit's namespace
	keys []item          // what it reads, as commitKeys names them
	in   map[string]bool // their itemIDs

	mu   sync.Mutex
	got  map[string]item // itemID → item (nil: absent), once read
	used bool
}

var _ datastore.CommitPrefetcher = (*Driver)(nil)

// PrefetchCommit implements datastore.CommitPrefetcher: the keys a commit
// of paths in d's namespace reads (as puts: a delete of one reads fewer),
// for the next commit in ctx of another namespace to read with its own.
func (d *Driver) PrefetchCommit(ctx context.Context, paths []string) context.Context {
	if len(paths) == 0 {
		return ctx
	}
	next := d.newPrefetch(paths)
	if pf := prefetchFor(ctx, d.pfx); pf != nil && pf.holds(next) {
		return ctx // read already (ReadStatsForCommits), not yet used
	}
	return withPrefetch(ctx, next)
}

// newPrefetch is a pending prefetch of what a commit of paths (as puts)
// in d's namespace reads.
func (d *Driver) newPrefetch(paths []string) *prefetch {
	var entries []datastore.Entry
	for _, p := range paths {
		entries = append(entries, datastore.Entry{Put: &datastore.Staged{Path: p}})
	}
	pf := &prefetch{pfx: d.pfx, keys: dedupKeys(d.commitKeys(entries, d.partsOf(entries))), in: map[string]bool{}}
	for _, k := range pf.keys {
		pf.in[itemID(k)] = true
	}
	return pf
}

// holds reports that pf has been read, is not used yet and read every key
// of o: o would read nothing more.
func (pf *prefetch) holds(o *prefetch) bool {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	if pf.got == nil || pf.used || pf.pfx != o.pfx {
		return false
	}
	for id := range o.in {
		if !pf.in[id] {
			return false
		}
	}
	return true
}

var _ datastore.CommitStatReader = (*Driver)(nil)

// ReadStatsForCommits implements datastore.CommitStatReader with one
// TransactGetItems (snapshotRead) of each namespace's paths and of what a
// commit of them there reads (its file items are the stat's). Past 100
// keys it reads nothing: the stat's BatchGetItem and each commit's own
// read cost as few requests then.
func (d *Driver) ReadStatsForCommits(ctx context.Context, stats map[string][]string) (stat, commit context.Context, ok bool, err error) {
	ra := &readAhead{table: d.table, items: map[string]item{}, parts: map[string]bool{}}
	var vouch, rest []item
	var pfs []*prefetch
	for _, name := range slices.Sorted(maps.Keys(stats)) {
		paths := stats[name]
		if len(paths) == 0 {
			continue
		}
		nd, err := d.Namespace(name)
		if err != nil {
			return ctx, ctx, false, err
		}
		n := nd.(*Driver)
		pf := n.newPrefetch(paths)
		pfs = append(pfs, pf)
		for _, k := range ra.holdStat(n, paths) {
			ra.items[itemID(k)] = nil
			rest = append(rest, k)
		}
		v, r := n.splitVouching(pf.keys)
		vouch, rest = append(vouch, v...), append(rest, r...)
	}
	if len(pfs) == 0 || len(dedupKeys(append(slices.Clone(vouch), rest...))) > maxSnapshotKeys {
		return ctx, ctx, false, nil
	}
	got, err := d.snapshotRead(ctx, vouch, rest)
	if err != nil {
		return ctx, ctx, false, err
	}
	for _, it := range got {
		if _, held := ra.items[itemID(it)]; held {
			ra.items[itemID(it)] = it
		}
	}
	commit = ctx
	for _, pf := range pfs {
		pf.keep(got)
		commit = withPrefetch(commit, pf)
	}
	return context.WithValue(ctx, readAheadKey{}, ra), commit, true, nil
}

// prefetchToRead returns the keys of ctx's prefetch for a commit of d's
// namespace to read with its own n keys (serializably: they are another
// commit's vouching keys too), if one is pending for another namespace and
// all fit one TransactGetItems.
func (d *Driver) prefetchToRead(ctx context.Context, n int) (*prefetch, []item) {
	for _, pf := range prefetchesOf(ctx) {
		if pf.pfx == d.pfx || n+len(pf.keys) > maxSnapshotKeys {
			continue
		}
		pf.mu.Lock()
		pending := pf.got == nil && !pf.used
		pf.mu.Unlock()
		if pending {
			return pf, pf.keys
		}
	}
	return nil, nil
}

// keep records what the read that carried pf's keys found of them.
func (pf *prefetch) keep(got []item) {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	pf.got = map[string]item{}
	for _, it := range got {
		if id := itemID(it); pf.in[id] {
			pf.got[id] = it
		}
	}
}

// prefetched returns the state of keys as ctx's prefetch read it for a
// commit of d's namespace, once, if it read every one of them.
func (d *Driver) prefetched(ctx context.Context, keys []item) (map[string]item, bool) {
	pf := prefetchFor(ctx, d.pfx)
	if pf == nil {
		return nil, false
	}
	pf.mu.Lock()
	defer pf.mu.Unlock()
	if pf.got == nil || pf.used {
		return nil, false
	}
	cur := map[string]item{}
	for _, k := range keys {
		id := itemID(k)
		if !pf.in[id] {
			return nil, false // a key it did not read: the commit reads
		}
		if it := pf.got[id]; it != nil {
			cur[id] = it
		}
	}
	pf.used = true
	d.meter.count(&d.meter.s.CommitsPrefetched)
	return cur, true
}

// readCarrying reads keys as a drop reads its heads (one request, no
// snapshot needed), or, when ctx carries a pending prefetch that fits,
// in one TransactGetItems with the prefetch's keys: the catalog row's
// removal that follows a model's drop builds on it (lifecycle.Apply).
func (d *Driver) readCarrying(ctx context.Context, keys []item) ([]item, error) {
	keys = dedupKeys(keys)
	pf, later := d.prefetchToRead(ctx, len(keys))
	if pf == nil {
		if len(keys) == 1 {
			it, err := d.getItem(ctx, keys[0])
			if it == nil {
				return nil, err
			}
			return []item{it}, err
		}
		return d.batchGet(ctx, keys)
	}
	got, err := d.snapshotRead(ctx, append(keys, later...), nil)
	if err != nil {
		return nil, err
	}
	pf.keep(got)
	return got, nil
}

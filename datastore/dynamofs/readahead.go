package dynamofs

import (
	"context"
	"sync"

	"github.com/lakemeta/lake/datastore"
)

// readAhead is the snapshot of ReadAhead: the items of the shard counters
// (and live-commit list) of some namespaces and of some records, read in
// one BatchGetItem, each part served once
// (datastore.Store.ReadAhead says why a part served later than it was
// read cannot be wrong).
type readAhead struct {
	table string
	mu    sync.Mutex
	items map[string]item // pk NUL sk → the item, nil if absent
	// parts are the reads held, not yet served: "feed" NUL namespace
	// prefix, "rec" NUL record key, "stat" NUL namespace prefix.
	parts map[string]bool
	// heads are the head keys of the known partitions
	// (datastore.WithKnownPartitions) read with each namespace's feed
	// part, by namespace prefix; served with that part.
	heads map[string][]item
}

type readAheadKey struct{}

// ReadAhead implements datastore.ReadAheader with one BatchGetItem (more
// past 100 keys) of the namespaces' shard counters and live-commit lists,
// as ChangedPartitions reads them, and of the records.
func (d *Driver) ReadAhead(ctx context.Context, scopes []string, records []string, statScope string, paths []string) (context.Context, error) {
	return datastore.StatsReadAhead(ctx, d, scopes, records, statScope, paths)
}

// ReadAheadStats implements datastore.StatsReadAheader: ReadAhead with
// the Stat of paths of several namespaces (stats: namespace → paths), all
// in the same read.
func (d *Driver) ReadAheadStats(ctx context.Context, scopes []string, records []string, stats map[string][]string) (context.Context, error) {
	ra := &readAhead{table: d.table, items: map[string]item{}, parts: map[string]bool{}}
	var keys, vouch []item
	for _, name := range scopes {
		nd, err := d.Namespace(name)
		if err != nil {
			return ctx, err
		}
		n := nd.(*Driver)
		for _, sh := range shardNames() {
			vouch = append(vouch, n.counterKey(sh))
		}
		vouch = append(vouch, n.liveKey())
		ra.parts["feed\x00"+n.pfx] = true
	}
	for _, k := range records {
		keys = append(keys, recordKey(k))
		ra.parts["rec\x00"+k] = true
	}
	for statScope, paths := range stats {
		if len(paths) == 0 {
			continue
		}
		nd, err := d.Namespace(statScope)
		if err != nil {
			return ctx, err
		}
		keys = append(keys, ra.holdStat(nd.(*Driver), paths)...)
	}
	if len(keys)+len(vouch) == 0 {
		return ctx, nil
	}
	// The known partitions' heads, while the read stays one request
	// (ChangedPartitions uses them: knownFill).
	room := batchGetSize - len(keys) - len(vouch)
	for _, name := range scopes {
		n, err := d.Namespace(name)
		if err != nil {
			return ctx, err
		}
		nd := n.(*Driver)
		for _, p := range datastore.KnownPartitions(ctx, name) {
			if room <= 0 || datastore.ValidatePartition(p) != nil {
				break
			}
			k := nd.headKey(p)
			if ra.heads == nil {
				ra.heads = map[string][]item{}
			}
			ra.heads[nd.pfx] = append(ra.heads[nd.pfx], k)
			keys = append(keys, k)
			room--
		}
	}
	for _, k := range append(vouch, keys...) {
		ra.items[itemID(k)] = nil
	}
	// A BatchGetItem, as ChangedPartitions reads the counters (feed.go
	// says why not a snapshot); the stats a sync's push reads need none.
	got, err := d.batchGet(ctx, dedupKeys(append(vouch, keys...)))
	if err != nil {
		return ctx, err
	}
	for _, it := range got {
		ra.items[itemID(it)] = it
	}
	return context.WithValue(ctx, readAheadKey{}, ra), nil
}

// holdStat names the Stat of paths in n's namespace as a part of ra and
// returns the keys it reads.
func (ra *readAhead) holdStat(n *Driver, paths []string) []item {
	keys := make([]item, len(paths))
	for i, p := range paths {
		keys[i] = key(n.filePK(n.partition(p)), p)
	}
	ra.parts["stat\x00"+n.pfx] = true
	return keys
}

func itemID(it item) string { return getS(it, attrPK) + "\x00" + getS(it, attrSK) }

// aheadOf returns ctx's snapshot if it is of d's table.
func (d *Driver) aheadOf(ctx context.Context) *readAhead {
	ra, _ := ctx.Value(readAheadKey{}).(*readAhead)
	if ra == nil || ra.table != d.table {
		return nil
	}
	return ra
}

// take returns the items of keys (those present) from ctx's snapshot if
// it holds part, unserved, and every key of it; the part is then served.
// ok false: read them.
func (d *Driver) take(ctx context.Context, part string, keys []item) (got []item, ok bool) {
	ra := d.aheadOf(ctx)
	if ra == nil {
		return nil, false
	}
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if !ra.parts[part] {
		return nil, false
	}
	for _, k := range keys {
		if _, held := ra.items[itemID(k)]; !held {
			return nil, false
		}
	}
	delete(ra.parts, part)
	for _, k := range keys {
		if it := ra.items[itemID(k)]; it != nil {
			got = append(got, it)
		}
	}
	return got, true
}

// aheadFeed returns the items of keys (d's counters and live list) from
// ctx's snapshot, once, or ok false: read them. known are the heads of the
// known partitions read with them (present ones), if any.
func (d *Driver) aheadFeed(ctx context.Context, keys []item) (got, known []item, ok bool) {
	ra := d.aheadOf(ctx)
	if ra == nil {
		return nil, nil, false
	}
	ra.mu.Lock()
	hk := ra.heads[d.pfx]
	delete(ra.heads, d.pfx)
	ra.mu.Unlock()
	if got, ok = d.take(ctx, "feed\x00"+d.pfx, keys); !ok {
		return nil, nil, false
	}
	ra.mu.Lock()
	defer ra.mu.Unlock()
	for _, k := range hk {
		if it := ra.items[itemID(k)]; it != nil {
			known = append(known, it)
		}
	}
	return got, known, true
}

// aheadRecord returns record k's item from ctx's snapshot (nil: absent),
// once, or ok false: read it.
func (d *Driver) aheadRecord(ctx context.Context, k string) (item, bool) {
	got, ok := d.take(ctx, "rec\x00"+k, []item{recordKey(k)})
	if !ok || len(got) == 0 {
		return nil, ok
	}
	return got[0], true
}

// aheadStat returns the file items of keys from ctx's snapshot, once, or
// ok false: read them.
func (d *Driver) aheadStat(ctx context.Context, keys []item) ([]item, bool) {
	return d.take(ctx, "stat\x00"+d.pfx, keys)
}

var (
	_ datastore.ReadAheader      = (*Driver)(nil)
	_ datastore.StatsReadAheader = (*Driver)(nil)
)

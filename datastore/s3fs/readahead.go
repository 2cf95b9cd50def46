package s3fs

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// S3 has no request that reads several objects, so where DynamoDB reads a
// sync's reads ahead in one BatchGetItem, S3 sends the same requests at
// once: the listing of each scope's heads (as its ChangedPartitions lists
// them, pending marks settled first), each record, and the Stat of the
// dirty paths and of their models' catalog rows. Each of those calls made
// with the returned context takes its answer once, instead of sending its
// requests one after another: the requests are the ones the calls would
// have sent, and the sync waits for the longest of them, not for their sum
// (issue 31).
//
// A part that fails is not kept (its call reads afresh and reports its own
// failure). The answers are of one instant, as the calls made one after
// another would have been of nearly one: a feed cursor is a snapshot that
// every later commit moves past, a record read is a read at one instant,
// and a Stat's tail is only the commit's starting point (handoff.go),
// which its conditional writes check.

// readAhead is what ReadAhead read, by key, each part served once.
type readAhead struct {
	c       *client // the client (bucket) it was read with: no other's calls are served
	mu      sync.Mutex
	records map[string]aheadRead // record object key → GetRecord's answer
	stats   map[string]aheadStat // driver prefix → its Stat
	// heads are the scopes' heads listings, by driver prefix: each served
	// once to ChangedPartitions (aheadHeads), and read by the Stats made
	// beside it (listedClean). The map is written only before the
	// read-ahead's requests are sent.
	heads map[string]*headsListing
}

// headsListing is a scope's listSettledHeads answer once done is closed
// (ok false if it failed); served once ChangedPartitions took it (under
// the read-ahead's mu).
type headsListing struct {
	done       chan struct{}
	keys       []listed
	ok, served bool
}

type aheadRead struct {
	body []byte
	err  error // nil, or the not-found error the read returned
}

type aheadStat struct {
	paths []string // sorted, no repeats: as Store.StatMany passes them
	out   map[string]datastore.Info
}

type readAheadKey struct{}

// ReadAhead implements datastore.ReadAheader by sending the reads at once.
func (d *Driver) ReadAhead(ctx context.Context, scopes []string, records []string, statScope string, paths []string) (context.Context, error) {
	return datastore.StatsReadAhead(ctx, d, scopes, records, statScope, paths)
}

// ReadAheadStats implements datastore.StatsReadAheader: ReadAhead with the
// Stat of paths of several namespaces (a sync's dirty paths and their
// models' catalog rows), each namespace's at once with the rest.
func (d *Driver) ReadAheadStats(ctx context.Context, scopes []string, records []string, stats map[string][]string) (context.Context, error) {
	ra := &readAhead{c: d.c, heads: map[string]*headsListing{}, records: map[string]aheadRead{}, stats: map[string]aheadStat{}}
	var scoped []*Driver
	for _, name := range scopes {
		nd, err := d.Namespace(name)
		if err != nil {
			return ctx, err
		}
		n := nd.(*Driver)
		scoped = append(scoped, n)
		ra.heads[n.prefix] = &headsListing{done: make(chan struct{})}
	}
	var wg sync.WaitGroup
	for _, n := range scoped {
		wg.Go(func() {
			l := ra.heads[n.prefix]
			defer close(l.done)
			if keys, err := n.listSettledHeads(ctx); err == nil {
				l.keys, l.ok = keys, true
			}
		})
	}
	for _, k := range records {
		key := d.recordKey(k)
		wg.Go(func() {
			// A namespace's registry record beside its heads, listed
			// here: known from the listing, or read after it.
			if r, ok := d.listedRecord(ctx, ra, key); ok { // listedrecords.go
				ra.mu.Lock()
				ra.records[key] = r
				ra.mu.Unlock()
				return
			}
			o, err := d.getRecordObject(ctx, key)
			if err == nil || errors.Is(err, metastore.ErrNotFound) {
				ra.mu.Lock()
				ra.records[key] = aheadRead{body: o.body, err: err}
				ra.mu.Unlock()
			}
		})
	}
	for scope, paths := range stats {
		if len(paths) == 0 {
			continue
		}
		nd, err := d.Namespace(scope)
		if err != nil {
			return ctx, err
		}
		n := nd.(*Driver)
		sorted := slices.Compact(slices.Sorted(slices.Values(paths)))
		wg.Go(func() {
			if out, err := n.Stat(context.WithValue(ctx, listingsKey{}, ra), sorted); err == nil {
				ra.mu.Lock()
				ra.stats[n.prefix] = aheadStat{paths: sorted, out: out}
				ra.mu.Unlock()
			}
		})
	}
	wg.Wait()
	return context.WithValue(ctx, readAheadKey{}, ra), nil
}

var (
	_ datastore.ReadAheader      = (*Driver)(nil)
	_ datastore.StatsReadAheader = (*Driver)(nil)
)

// aheadOf returns ctx's read-ahead if it was read with d's client.
func (d *Driver) aheadOf(ctx context.Context) *readAhead {
	ra, _ := ctx.Value(readAheadKey{}).(*readAhead)
	if ra == nil || ra.c != d.c {
		return nil
	}
	return ra
}

// aheadHeads returns d's heads as listSettledHeads lists them: from ctx's
// read-ahead, once, or read now.
func (d *Driver) aheadHeads(ctx context.Context) ([]listed, error) {
	if ra := d.aheadOf(ctx); ra != nil {
		if l := ra.heads[d.prefix]; l != nil {
			<-l.done // closed before ReadAheadStats returned
			ra.mu.Lock()
			take := l.ok && !l.served
			l.served = true
			ra.mu.Unlock()
			if take {
				return l.keys, nil
			}
		}
	}
	return d.listSettledHeads(ctx)
}

// aheadRecord returns the read of the record object key from ctx's
// read-ahead, once; ok false: read it.
func (d *Driver) aheadRecord(ctx context.Context, key string) (r aheadRead, ok bool) {
	ra := d.aheadOf(ctx)
	if ra == nil {
		return aheadRead{}, false
	}
	ra.mu.Lock()
	defer ra.mu.Unlock()
	r, ok = ra.records[key]
	delete(ra.records, key)
	return r, ok
}

// aheadStat returns the Stat of paths (sorted, no repeats) from ctx's
// read-ahead if it read exactly those of d's, once; ok false: read them.
func (d *Driver) aheadStat(ctx context.Context, paths []string) (map[string]datastore.Info, bool) {
	ra := d.aheadOf(ctx)
	if ra == nil {
		return nil, false
	}
	ra.mu.Lock()
	defer ra.mu.Unlock()
	s, ok := ra.stats[d.prefix]
	if !ok || !slices.Equal(s.paths, paths) {
		return nil, false
	}
	delete(ra.stats, d.prefix)
	return maps.Clone(s.out), true
}

// listingsKey carries a read-ahead to the Stats it makes (listedClean).
type listingsKey struct{}

// listing returns the heads listing ra made of the scope at prefix, once
// it is done; ok is false when ra made none, it failed, or ctx ended
// first.
func (ra *readAhead) listing(ctx context.Context, prefix string) ([]listed, bool) {
	l := ra.heads[prefix]
	if l == nil {
		return nil, false
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		return nil, false
	}
	return l.keys, l.ok
}

// listedClean reports whether the heads listing of d's namespace that the
// read-ahead of ctx makes beside a Stat (a sync reads the changed
// partitions and stats its dirty paths at once) shows part's head at etag,
// the ETag of the head the Stat read, and no pending mark of part. The
// Stat then reads no log after the head's watermark (issue 31: one LIST a
// partition stat'ed, two in a sync of one changed file): at the listing's
// instant there is none. A commit creates its mark before its log object
// and replaces the head before it deletes the mark (a settler of a dead
// one too), so an object after the watermark is a mark in the listing or
// a head the listing shows at another ETag. Only with marks beside the
// heads (one listing of both); a log object written without its mark is
// not lake's protocol, and is read by the partition's next writer, whose
// create at the position it holds fails.
func (d *Driver) listedClean(ctx context.Context, part, etag string) bool {
	ra, _ := ctx.Value(listingsKey{}).(*readAhead)
	if ra == nil || ra.c != d.c || etag == "" || !d.marksBesideHeads() {
		return false
	}
	keys, ok := ra.listing(ctx, d.prefix)
	return ok && d.cleanIn(keys, part, etag)
}

// cleanIn reports whether keys, a listing of the heads with the pending
// marks beside them (listSettledHeads), shows part's head with etag and
// no pending mark of part: the head read with etag is then the whole
// tail as of the listing, nothing after its watermark.
func (d *Driver) cleanIn(keys []listed, part, etag string) bool {
	if etag == "" || !d.marksBesideHeads() {
		return false
	}
	hk, clean := d.headKey(part), false
	for _, k := range keys {
		if k.key == hk {
			clean = k.etag == etag
		} else if p, _, ok := d.pendingOf(k.key); ok && p == part {
			return false
		}
	}
	return clean
}

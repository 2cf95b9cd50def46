package syncload

import (
	"sort"
	"time"
)

// Row is one interval of a run's time series. Latencies are means per
// iteration, in milliseconds, over the iterations that ended in the
// interval; costs are means per sync.
type Row struct {
	// T is the interval's end, in seconds since the run's start.
	T                                                                float64
	Iterations                                                       int
	IterPerSec                                                       float64
	Errors                                                           int
	LockTimeouts                                                     int
	Syncs                                                            int
	LockWaitMs, PullMs, WorkMs, PushMs, CommitMs, CatalogMs, PruneMs float64
	RequestsPerSync, ItemsReadPerSync, ItemsWrittenPerSync           float64
	// StoreRequestsPerSync and StoreItemsReadPerSync are DynamoDB's or
	// S3's own requests and items read per sync (zero on bolt and a node).
	StoreRequestsPerSync, StoreItemsReadPerSync float64
	// IndexWrittenPerSync counts the index entries a sync's commit wrote.
	IndexWrittenPerSync float64
	// CatalogRows is the largest catalog a worker read in the interval.
	CatalogRows int
	// IndexEntries is a namespace index's size: the files of the
	// namespace's models (every worker's under one global lock).
	IndexEntries float64
	// HotKey is the key with the most load in the interval and HotKeyShare
	// its share of all: DynamoDB's partition keys or S3's key prefixes,
	// loaded by the items read (at least one a request), when the store's
	// requests are counted; else the datastore driver's keys, loaded by
	// their requests.
	HotKey      string
	HotKeyShare float64
}

// Columns names the numeric series of a Row, in CSV order, with their
// values.
func (r Row) Columns() ([]string, []float64) {
	return []string{"t_s", "iterations", "iter_per_s", "errors", "lock_timeouts", "syncs",
			"lock_wait_ms", "pull_ms", "work_ms", "push_ms", "commit_ms", "catalog_ms", "prune_ms",
			"requests_per_sync", "items_read_per_sync", "items_written_per_sync", "index_written_per_sync",
			"store_requests_per_sync", "store_items_read_per_sync",
			"catalog_rows", "index_entries", "hot_key_share"},
		[]float64{r.T, float64(r.Iterations), r.IterPerSec, float64(r.Errors), float64(r.LockTimeouts), float64(r.Syncs),
			r.LockWaitMs, r.PullMs, r.WorkMs, r.PushMs, r.CommitMs, r.CatalogMs, r.PruneMs,
			r.RequestsPerSync, r.ItemsReadPerSync, r.ItemsWrittenPerSync, r.IndexWrittenPerSync,
			r.StoreRequestsPerSync, r.StoreItemsReadPerSync,
			float64(r.CatalogRows), r.IndexEntries, r.HotKeyShare}
}

// Series cuts samples into rows of width interval. Intervals without an
// ending iteration are rows of zero rate (the lock may have stalled every
// worker); a last interval shorter than half of one is dropped.
func Series(cfg Config, samples []Sample, interval time.Duration) []Row {
	if len(samples) == 0 || interval <= 0 {
		return nil
	}
	ss := append([]Sample(nil), samples...)
	sort.Slice(ss, func(i, j int) bool { return ss[i].End < ss[j].End })
	end := ss[len(ss)-1].End
	n := int(end / interval)
	if rest := end - time.Duration(n)*interval; rest >= interval/2 || n == 0 {
		n++
	}
	rows := make([]Row, n)
	live := map[int]int{} // worker → live files, as of the interval
	i := 0
	for b := range rows {
		lo, hi := time.Duration(b)*interval, time.Duration(b+1)*interval
		width := interval
		if b == n-1 && end < hi {
			width = end - lo
		}
		r := &rows[b]
		r.T = (lo + width).Seconds()
		keys, storeKeys := map[string]int64{}, map[string]int64{}
		var reqs, storeReqs int64
		for ; i < len(ss) && (ss[i].End < hi || b == n-1); i++ {
			s := ss[i]
			r.Iterations++
			if !s.OK {
				r.Errors++
			}
			if s.LockTimeout {
				r.LockTimeouts++
			}
			r.Syncs += s.Syncs
			r.LockWaitMs += ms(s.Lock)
			r.PullMs += ms(s.Pull)
			r.WorkMs += ms(s.Work)
			r.PushMs += ms(s.Push)
			r.CommitMs += ms(s.Commit)
			r.CatalogMs += ms(s.Catalog)
			r.PruneMs += ms(s.Prune)
			r.RequestsPerSync += float64(s.Requests)
			r.ItemsReadPerSync += float64(s.ItemsRead)
			r.ItemsWrittenPerSync += float64(s.ItemsWritten)
			r.IndexWrittenPerSync += float64(s.IndexWritten)
			r.CatalogRows = max(r.CatalogRows, s.CatalogRows)
			live[s.Worker] = s.LiveFiles
			r.StoreRequestsPerSync += float64(s.StoreRequests)
			r.StoreItemsReadPerSync += float64(s.StoreItemsRead)
			for k, v := range s.Keys {
				keys[k] += v
				reqs += v
			}
			for k, v := range s.StoreKeys {
				storeKeys[k] += v
				storeReqs += v
			}
		}
		if width > 0 {
			r.IterPerSec = float64(r.Iterations-r.Errors) / width.Seconds()
		}
		if r.Iterations > 0 {
			it := float64(r.Iterations)
			for _, p := range []*float64{&r.LockWaitMs, &r.PullMs, &r.WorkMs, &r.PushMs, &r.CommitMs, &r.CatalogMs, &r.PruneMs} {
				*p /= it
			}
		}
		if r.Syncs > 0 {
			sy := float64(r.Syncs)
			for _, p := range []*float64{&r.RequestsPerSync, &r.ItemsReadPerSync, &r.ItemsWrittenPerSync, &r.IndexWrittenPerSync, &r.StoreRequestsPerSync, &r.StoreItemsReadPerSync} {
				*p /= sy
			}
		}
		r.IndexEntries = indexEntries(cfg, live)
		if storeReqs > 0 {
			keys, reqs = storeKeys, storeReqs
		}
		for k, v := range keys {
			if share := float64(v) / float64(reqs); share > r.HotKeyShare || (share == r.HotKeyShare && k < r.HotKey) {
				r.HotKey, r.HotKeyShare = k, share
			}
		}
	}
	return rows
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// indexEntries is the size of one namespace's index: every worker's files
// under the global lock's one namespace, else a worker's own (the mean).
func indexEntries(cfg Config, live map[int]int) float64 {
	if len(live) == 0 {
		return 0
	}
	sum := 0
	for _, v := range live {
		sum += v
	}
	if cfg.Lock == LockGlobal {
		return float64(sum)
	}
	return float64(sum) / float64(len(live))
}

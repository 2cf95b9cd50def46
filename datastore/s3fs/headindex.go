package s3fs

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lakemeta/lake/datastore"
	"golang.org/x/sync/errgroup"
)

// A partition's path index in its head (issue 31, layout "models-v3"). The
// index of the layouts before is an object a path, f/PATH~, written by
// every roll-forward: a first sync of 300 new files wrote 300 of them, of
// the 354 requests it took, and every dropped model deleted one a file.
// A datastore recorded "models-v3" keeps a partition's index in the
// partition's head (head.Files, head.Indexed), which the roll-forward
// replaces anyway, conditionally, to move the watermark: a commit's
// entries go into the same write, whatever their number, and a Stat that
// reads the head reads the entries with it.
//
// Nothing else changes: the log is the truth and the index what the
// roll-forward made of it up to the watermark, each entry moving only up;
// a reader answers a path from the objects after the watermark, then from
// the index, as before. Only where the index lives does: every reader of
// an entry (a Stat, the clash checks, a claim's guard, a drop, Reclaim,
// List, lake data check) takes it from the head when the head is Indexed.
// An index object f/PATH~ of an Indexed partition is no entry: it is what
// a roll-forward moving the index out of the head left when cut short
// (spill, below), or a foreign writer's, and lake data check names it.
//
// A head is a single object read whole, and a head read by every reader of
// its partition must stay small: when a roll-forward would leave more than
// headIndexMaxFiles entries, or more than headIndexMaxBytes of them, it
// writes them all as index objects first (as a roll-forward of the older
// layouts writes them, each only moving up) and then the head without
// them (Indexed false), for good: from then on the partition's index is in
// f/, as in a "models-v2" datastore. A crash in between leaves the head
// Indexed and the objects written, which the next roll-forward writes
// again, moving nothing.
var (
	headIndexMaxFiles = 1000
	headIndexMaxBytes = 128 << 10
)

// headEntry returns path's index entry in h, an Indexed head of part, or
// nil; an entry that does not name path is damage, as an index object's.
func (d *Driver) headEntry(part string, h head, path string) (*indexEntry, error) {
	e, ok := h.Files[path]
	if !ok {
		return nil, nil
	}
	if e.Path != path || e.Pos == 0 || (!e.Deleted && e.Version == "") {
		return nil, datastore.Damaged(d.c.bucket+"/"+d.headKey(part), "its index entry of %q names path %q at position %d", path, e.Path, e.Pos)
	}
	return &e, nil
}

// applyToHead rolls objs (a tail's counted log objects, in order) into
// h.Files, a copy: each change at a position above h.Applied becomes its
// path's entry unless the entry is there or further, and the version it
// replaces is handed to Reclaim (markReplaced), as updateIndex does for an
// index object.
func (d *Driver) applyToHead(ctx context.Context, h *head, objs []*logObject, now time.Time) error {
	files := maps.Clone(h.Files)
	if files == nil {
		files = map[string]indexEntry{}
	}
	for _, o := range objs {
		for i, e := range o.Entries {
			pos := o.First + uint64(i)
			if pos <= h.Applied {
				continue
			}
			cur, ok := files[e.Path]
			if ok && cur.Pos >= pos {
				continue
			}
			if ok && !cur.Deleted && cur.Version != e.Version {
				if err := d.markReplaced(ctx, e.Path, cur.Version, cur.Chunks, now); err != nil {
					return err
				}
			}
			files[e.Path] = indexEntry{logEntry: e, Pos: pos, Time: o.Time}
		}
	}
	h.Files = files
	return nil
}

// spillIfBig moves h's index out of the head when it outgrew it: every
// entry written as its index object (moving only up, in parallel), then
// h left without them, not Indexed. h is written by the caller.
func (d *Driver) spillIfBig(ctx context.Context, h *head, now time.Time) error {
	if !h.Indexed || !headIndexTooBig(h.Files) {
		return nil
	}
	// Written at once, and those in flight when one fails finish
	// (untilFailure): what a cut leaves is what was written.
	entries := slices.Collect(maps.Values(h.Files))
	err := untilFailure(len(entries), func(i int) error {
		e := entries[i]
		_, err := d.updateIndex(ctx, e.logEntry, e.Pos, e.Time, now, nil)
		return err
	})
	if err != nil {
		return err
	}
	h.Indexed, h.Files = false, nil
	return nil
}

// headIndexTooBig reports whether files is more than a head keeps.
func headIndexTooBig(files map[string]indexEntry) bool {
	if len(files) > headIndexMaxFiles {
		return true
	}
	b, _ := json.Marshal(files)
	return len(b) > headIndexMaxBytes
}

// currentEntry returns path's index entry where its partition keeps it:
// in the head when the head is Indexed, else its index object (a datastore
// of the older layouts reads no head).
func (d *Driver) currentEntry(ctx context.Context, path string) (*indexEntry, error) {
	if d.headIndexes() {
		part := d.partition(path)
		h, _, ok, err := d.readHead(ctx, part)
		if err != nil {
			return nil, err
		}
		if ok && h.Indexed {
			return d.headEntry(part, h, path)
		}
	}
	e, _, err := d.readIndex(ctx, path)
	return e, err
}

// listIndexed is List in a datastore whose heads hold their index: the
// heads of the partitions that may hold paths under prefix are listed, and
// read (headsParallel at once) in the order of their paths' keys, an
// Indexed one's entries taken from it; the index objects under prefix of
// the partitions that keep theirs in f/ are listed and read as before.
// Both are merged in key order (the order of f/PATH~, as List has always
// returned), up to limit; while the index objects' listing has more,
// nothing after its last key is returned, so that none of them is passed
// over. An index object of an Indexed partition is no entry, and is
// skipped.
//
// A page reads only the heads it can need: every key of a partition
// starts with its paths' prefix (PartitionPrefix, escaped), so a partition
// whose keys all sort before the page's start is not read, and once limit
// entries sort before the next partition's prefix, no later partition can
// hold one of the page's (a listing of every file read each partition's
// head on every page: pages × partitions GETs).
func (d *Driver) listIndexed(ctx context.Context, prefix string, limit int, pos []byte) ([]datastore.Info, []byte, error) {
	after := ""
	if pos != nil {
		after = leaf(string(pos))
	}
	heads, err := d.c.listAll(ctx, d.prefix+"h/", "")
	if err != nil {
		return nil, nil, err
	}
	type listedPart struct{ part, from string } // from: its keys' common prefix
	var parts []listedPart
	for _, k := range heads {
		p, ok := d.headPartition(k.key)
		if !ok || !datastore.PrefixMayMatch(p, prefix) {
			continue
		}
		from := escape(datastore.PartitionPrefix(p))
		if from < after && !strings.HasPrefix(after, from) {
			continue // every key of it sorts before the page
		}
		parts = append(parts, listedPart{p, from})
	}
	slices.SortFunc(parts, func(a, b listedPart) int { return strings.Compare(a.from, b.from) })
	type cand struct {
		key, path string
		info      *datastore.Info // from a head; nil: an index object to read
	}
	var mu sync.Mutex
	var cands []cand
	indexed := map[string]bool{} // the partitions read whose heads hold their index
	readHeads := func(batch []string) error {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(headsParallel)
		for _, part := range batch {
			g.Go(func() error {
				h, _, ok, err := d.readHead(gctx, part)
				if err != nil {
					return err
				}
				var mine []cand
				if ok && h.Indexed {
					for path := range h.Files {
						key := leaf(path)
						if !strings.HasPrefix(path, prefix) || key <= after || d.partition(path) != part {
							continue
						}
						e, err := d.headEntry(part, h, path)
						if err != nil {
							return err
						}
						if !e.Deleted {
							info := e.info(part, e.Pos, e.Time)
							mine = append(mine, cand{key, path, &info})
						}
					}
				}
				mu.Lock()
				indexed[part] = ok && h.Indexed
				cands = append(cands, mine...)
				mu.Unlock()
				return nil
			})
		}
		return g.Wait()
	}
	// enough reports whether limit candidates sort before from, the key
	// prefix of the next partition not read: none of its keys can then
	// be on the page.
	enough := func(from string) bool {
		if len(cands) < limit {
			return false
		}
		keys := make([]string, len(cands))
		for i, c := range cands {
			keys[i] = c.key
		}
		slices.Sort(keys)
		return keys[limit-1] < from
	}
	for i := 0; i < len(parts); i += headsParallel {
		if enough(parts[i].from) {
			break
		}
		var batch []string
		for _, lp := range parts[i:min(i+headsParallel, len(parts))] {
			batch = append(batch, lp.part)
		}
		if err := readHeads(batch); err != nil {
			return nil, nil, err
		}
	}
	start := ""
	if pos != nil {
		start = d.fileKey(string(pos))
	}
	keys, more, err := d.c.list(ctx, d.prefix+"f/"+escape(prefix), start, limit)
	if err != nil {
		return nil, nil, err
	}
	if len(keys) > limit {
		keys, more = keys[:limit], true
	}
	// An index object of a partition whose head was not read above is
	// taken as an entry, and never reaches the page if that head holds
	// the index: its key sorts from the partition's prefix, after every
	// key the page returns (the heads were read until limit keys sorted
	// before it), or before the page's start (not listed).
	for _, k := range keys {
		rel := trimPrefix(k.key, d.prefix+"f/")
		if p := unleaf(rel); !indexed[d.partition(p)] {
			cands = append(cands, cand{key: rel, path: p})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int { return strings.Compare(a.key, b.key) })
	if more && len(keys) > 0 {
		last := trimPrefix(keys[len(keys)-1].key, d.prefix+"f/")
		cut := 0
		for cut < len(cands) && cands[cut].key <= last {
			cut++
		}
		cands = cands[:cut]
	}
	n := min(limit, len(cands))
	var out []datastore.Info
	for _, c := range cands[:n] {
		if c.info != nil {
			out = append(out, *c.info)
			continue
		}
		e, _, err := d.readIndex(ctx, c.path)
		if err != nil {
			return nil, nil, err
		}
		if e != nil && !e.Deleted {
			out = append(out, e.info(d.partition(c.path), e.Pos, e.Time))
		}
	}
	switch {
	case n < len(cands):
		return out, []byte(cands[n-1].path), nil
	case more && len(keys) > 0:
		// Every candidate up to the listing's last key is returned: go on
		// after that key, whatever was skipped.
		return out, []byte(unleaf(trimPrefix(keys[len(keys)-1].key, d.prefix+"f/"))), nil
	}
	return out, nil, nil
}

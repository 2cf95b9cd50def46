package s3fs

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lakemeta/lake/datastore"
)

// A path is a file or a directory, never both (datastore.Clash). S3's
// commit point is the conditional create of the partition's next log
// object, so checkClash runs after the tail is read and before that
// create, on every attempt: what it reads of the commit's own partition
// (the tail's objects and the index) is exactly what the create vouches
// for, since a commit that lands in between takes the position and this
// one reads again. Directories above a put in another partition (a model's
// data/T/I, data/T, data) and files below a put in other partitions (the
// model below data/T/I) are read from the index and their tails just
// before the create, but no S3 write can condition on them: a put of the
// file data/T/I racing the first files of the model T/I can let both
// through. That cross-partition pair is the clash S3 does not refuse
// atomically (docs/sync.md).
//
// Cost per put: the statTail of its directories in its partition (index
// GETs), one LIST of the index below it when it is a new file, and a Stat
// of its directories in other partitions.

// ChecksClashes reports that Commit refuses file/directory clashes (the
// conformance suite's FileOrDirectory).
func (d *Driver) ChecksClashes() bool { return true }

// checkClash returns the Clash a commit of entries to part would make over
// the tail t and the index, or nil. Its reads are made once per commit,
// not once per put (issue 31; a first sync of 300 files read the same
// directories 300 times): the directories above the puts in other
// partitions are one Stat, the tail's changes are walked once, and for a
// commit of two puts or more one listing of the index below the puts'
// common directory (indexKeysBelow) tells which paths have an entry at
// all, so that only those are read (a new file's own entry and the files
// below it cost nothing more). What it reads of the index is kept in t
// for the roll-forward (indexHint).
//
// covered are directories in other partitions that the commit's own claim
// objects check as they are created (claims.go): not read here. It returns
// the tail it read of each other partition (claims.go reads their claims
// from them) and the puts of new files (not over a live file), the only
// ones that need claims or guards.
func (d *Driver) checkClash(ctx context.Context, t *tail, part string, entries []datastore.Entry, covered map[string]bool) (map[string]*tail, []string, error) {
	tails := map[string]*tail{}
	fresh, err := d.checkClashInto(ctx, t, part, entries, tails, covered)
	return tails, fresh, err
}

// checkClashInto is checkClash, keeping the tails it reads in tails.
func (d *Driver) checkClashInto(ctx context.Context, t *tail, part string, entries []datastore.Entry, tails map[string]*tail, covered map[string]bool) (fresh []string, err error) {
	in := map[string]bool{}
	var puts []string
	for _, e := range entries {
		in[e.Path()] = true
		if e.Put != nil {
			puts = append(puts, e.Put.Path)
		}
	}
	if len(puts) == 0 {
		return nil, nil
	}
	known, dir, err := d.keysBelowOnce(ctx, t, puts)
	if err != nil {
		return nil, err
	}
	// The puts' own states first: a put over a live file reads nothing
	// more. While a file is live no directory above it is a file and no
	// file lies below it, in its partition or another (every commit that
	// made one of them checked it, and claims keep that across
	// partitions: claims.go), and the create vouches that it is still live
	// when the commit lands. A foreign writer that broke the rule already
	// is met by the puts of new files, and reported by a tree (docs/sync.md).
	cur, err := d.statTailKnown(ctx, t, puts, known, dir)
	if err != nil {
		return nil, err
	}
	for _, p := range puts {
		if c, ok := cur[p]; !ok || c.Deleted {
			fresh = append(fresh, p)
		}
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	sameOf, otherOf := map[string][]string{}, map[string][]string{}
	var stats, others []string
	seen := map[string]bool{}
	for _, p := range fresh {
		for _, a := range datastore.Ancestors(p) {
			if in[a] {
				continue
			}
			if d.partition(a) == part {
				sameOf[p] = append(sameOf[p], a)
				if !seen[a] {
					stats = append(stats, a)
				}
			} else {
				otherOf[p] = append(otherOf[p], a)
				if !seen[a] && !covered[a] {
					others = append(others, a)
				}
			}
			seen[a] = true
		}
	}
	if len(stats) > 0 {
		dirs, err := d.statTailKnown(ctx, t, stats, known, dir)
		if err != nil {
			return nil, err
		}
		maps.Copy(cur, dirs)
	}
	var got map[string]datastore.Info
	if len(others) > 0 {
		var read map[string]*tail
		if got, read, err = d.statOthers(ctx, others); err != nil {
			return nil, err
		}
		maps.Copy(tails, read)
	}
	// The tail's changes not yet in the index, in order: they decide the
	// paths they name; the index the others.
	tailLive, err := d.tailLive(ctx, t, part)
	if err != nil {
		return nil, err
	}
	skip := func(q string) bool {
		_, inTail := tailLive[q]
		return in[q] || inTail
	}
	for _, p := range fresh {
		for _, a := range sameOf[p] {
			if c, ok := cur[a]; ok && !c.Deleted {
				return nil, datastore.Clash(p, a)
			}
		}
		for _, a := range otherOf[p] {
			if c, ok := got[a]; ok && !c.Deleted {
				return nil, datastore.Clash(p, a)
			}
		}
		for q, live := range tailLive {
			if live && !in[q] && strings.HasPrefix(q, p+"/") {
				return nil, datastore.Clash(p, q)
			}
		}
		var below string
		switch {
		case t.exists && t.h.Indexed:
			below, err = d.liveHeadBelow(part, t.h, p+"/", skip)
		case known != nil:
			below, err = d.liveKnownBelow(ctx, known, p+"/", skip)
		default:
			below, err = d.liveIndexBelow(ctx, p+"/", skip)
		}
		if err != nil {
			return nil, err
		}
		if below != "" {
			return nil, datastore.Clash(p, below)
		}
	}
	return fresh, nil
}

// statOthers is the Stat of the directories above a commit's puts in other
// partitions. A partition that holds only claims (claimsonly.go: "data",
// above every model) and whose head this process read a moment ago with
// nothing after its watermark (ChangedPartitions, beside the heads
// listing: read.go) is not read again (issue 31: a model's first commit,
// one in each delete-and-create iteration of the seed's loop, read data's
// head and listed its log right after its sync's pull had read that head).
// It holds no file, so none of those directories is a live file there; a
// file put there since is met by the claim the commit then makes in that
// partition, whose create is conditional on the position this tail names
// and whose check (checkReq) reads the partition as that create's tail: a
// tail that moved since costs a lost race and a fresh read. A model that
// already claimed it is guarded by any put there since (claims.go).
func (d *Driver) statOthers(ctx context.Context, dirs []string) (map[string]datastore.Info, map[string]*tail, error) {
	return d.statTailsFrom(ctx, dirs, func(part string) *tail {
		t, ok := d.c.handoff.Get(d.prefix + part)
		if !ok || t == nil || !t.exists || !t.h.ClaimsOnly || len(t.objects) > 0 || t.blocked != nil {
			return nil
		}
		c := *t // the shelf's copy stays as it was offered
		return &c
	}, false)
}

// keysBelowOnce is indexKeysBelow, made once for t: a commit of one log
// object that finds it needs claims is made again, staged, from the same
// tail (claims.go's errNeedParts), and its first attempt takes the listing
// the first made instead of listing again (issue 31: a LIST in each first
// commit of a model). The listing was made after t was read, as the
// staged attempt's own would be, which is all it needs: a commit in t's
// partition since takes the position the create needs (the create fails,
// and the next attempt reads a new tail and lists afresh).
func (d *Driver) keysBelowOnce(ctx context.Context, t *tail, puts []string) (map[string]bool, string, error) {
	if t.exists && t.h.Indexed {
		return nil, "", nil // the head holds the index: nothing to list (headindex.go)
	}
	if l := t.keysBelow; l != nil && l.dir != "" && allUnder(puts, l.dir) && len(puts) >= 2 {
		return l.known, l.dir, nil
	}
	known, dir, err := d.indexKeysBelow(ctx, puts)
	if err == nil && known != nil {
		t.keysBelow = &listedBelow{dir: dir, known: known}
	}
	return known, dir, err
}

// listedBelow is a listing of the index below dir: the paths with an entry.
type listedBelow struct {
	dir   string
	known map[string]bool
}

// allUnder reports whether every path of paths lies below dir.
func allUnder(paths []string, dir string) bool {
	for _, p := range paths {
		if !strings.HasPrefix(p, dir) {
			return false
		}
	}
	return true
}

// indexKeysBelow lists the index below the deepest directory that holds
// every one of puts (dir, ending in "/") and returns the paths that have an
// entry there. It lists only for two puts or more (one put costs a GET and
// at most one LIST without it) and at most one page a put, the requests
// the listing saves: a directory holding more (a model of many files, of
// which a commit changes few) returns nil, and the puts are read one by
// one. A path under dir absent from the listing has no entry: a commit
// racing this one in the same partition takes the position this one's
// create needs; one in another partition (a deeper model) is the
// cross-partition race S3 does not refuse (above), as with a GET.
func (d *Driver) indexKeysBelow(ctx context.Context, puts []string) (map[string]bool, string, error) {
	if len(puts) < 2 {
		return nil, "", nil
	}
	dir := puts[0]
	for _, p := range puts[1:] {
		for !strings.HasPrefix(p, dir) {
			dir = dir[:len(dir)-1]
		}
	}
	dir = dir[:strings.LastIndexByte(dir, '/')+1]
	if dir == "" {
		return nil, "", nil
	}
	known := map[string]bool{}
	prefix := d.prefix + "f/" + escape(dir)
	start := ""
	for range len(puts) {
		keys, more, err := d.c.list(ctx, prefix, start, 1000)
		if err != nil {
			return nil, "", err
		}
		for _, k := range keys {
			known[unleaf(trimPrefix(k.key, d.prefix+"f/"))] = true
		}
		if !more || len(keys) == 0 {
			return known, dir, nil
		}
		start = keys[len(keys)-1].key
	}
	return nil, "", nil
}

// liveKnownBelow is liveIndexBelow over the paths known to have an index
// entry (indexKeysBelow's listing), in order.
func (d *Driver) liveKnownBelow(ctx context.Context, known map[string]bool, prefix string, skip func(string) bool) (string, error) {
	var cand []string
	for q := range known {
		if strings.HasPrefix(q, prefix) && !skip(q) {
			cand = append(cand, q)
		}
	}
	slices.Sort(cand)
	for _, q := range cand {
		e, _, err := d.readIndex(ctx, q)
		if err != nil {
			return "", err
		}
		if e != nil && !e.Deleted {
			return q, nil
		}
	}
	return "", nil
}

// maxBelowPages bounds the index pages liveIndexBelow reads (tombstones
// only: a live file ends it); Reclaim purges tombstones past the horizon.
const maxBelowPages = 100

// liveIndexBelow returns the first path of the index under prefix whose
// entry is live and that skip does not decide, or "".
func (d *Driver) liveIndexBelow(ctx context.Context, prefix string, skip func(string) bool) (string, error) {
	start := ""
	for range maxBelowPages {
		keys, more, err := d.c.list(ctx, d.prefix+"f/"+escape(prefix), start, 1000)
		if err != nil {
			return "", err
		}
		for _, k := range keys {
			q := unleaf(trimPrefix(k.key, d.prefix+"f/"))
			if skip(q) {
				continue
			}
			e, _, err := d.readIndex(ctx, q)
			if err != nil {
				return "", err
			}
			if e != nil && !e.Deleted {
				return q, nil
			}
		}
		if !more || len(keys) == 0 {
			return "", nil
		}
		start = keys[len(keys)-1].key
	}
	return "", fmt.Errorf("lake: more than %d pages of tombstones below %q", maxBelowPages, prefix)
}

// liveHeadBelow is liveIndexBelow over the index h holds (an Indexed head
// of part, headindex.go): the first of its paths under prefix, in order,
// whose entry is live and that skip does not decide, or "". Only part's
// files: a deeper model's below prefix is another partition's, which its
// claim in part keeps from clashing (claims.go), as it does for a
// partition whose index is in f/.
func (d *Driver) liveHeadBelow(part string, h head, prefix string, skip func(string) bool) (string, error) {
	var cand []string
	for q := range h.Files {
		if strings.HasPrefix(q, prefix) && !skip(q) {
			cand = append(cand, q)
		}
	}
	slices.Sort(cand)
	for _, q := range cand {
		e, err := d.headEntry(part, h, q)
		if err != nil {
			return "", err
		}
		if e != nil && !e.Deleted {
			return q, nil
		}
	}
	return "", nil
}

// AtomicClashKind implements dstest.AtomicClashKinds: every clash across
// partitions is refused atomically, by directory claims (claims.go).
func (d *Driver) AtomicClashKind(string) bool { return true }

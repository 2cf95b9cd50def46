package s3fs

import (
	"context"
	"fmt"
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
// the tail t and the index, or nil.
func (d *Driver) checkClash(ctx context.Context, t *tail, part string, entries []datastore.Entry) error {
	in := map[string]bool{}
	for _, e := range entries {
		in[e.Path()] = true
	}
	for _, e := range entries {
		if e.Put == nil {
			continue
		}
		p := e.Put.Path
		var same, other []string
		for _, a := range datastore.Ancestors(p) {
			if in[a] {
				continue
			}
			if d.partition(a) == part {
				same = append(same, a)
			} else {
				other = append(other, a)
			}
		}
		cur, err := d.statTail(ctx, t, append(same, p))
		if err != nil {
			return err
		}
		for _, a := range same {
			if c, ok := cur[a]; ok && !c.Deleted {
				return datastore.Clash(p, a)
			}
		}
		if len(other) > 0 {
			got, err := d.Stat(ctx, other)
			if err != nil {
				return err
			}
			for _, a := range other {
				if c, ok := got[a]; ok && !c.Deleted {
					return datastore.Clash(p, a)
				}
			}
		}
		if c, ok := cur[p]; ok && !c.Deleted {
			continue // a file already: nothing is below it
		}
		// Below p: the tail's changes not yet in the index decide the
		// paths they name; the index the others.
		tailLive := map[string]bool{}
		walk := d.tailWalk(t)
		for _, o := range t.objects {
			counts, err := walk.counts(ctx, o)
			if err != nil {
				return err
			}
			if counts {
				for _, info := range o.infos(part) {
					if strings.HasPrefix(info.Path, p+"/") {
						tailLive[info.Path] = !info.Deleted
					}
				}
			}
		}
		for q, live := range tailLive {
			if live && !in[q] {
				return datastore.Clash(p, q)
			}
		}
		below, err := d.liveIndexBelow(ctx, p+"/", func(q string) bool {
			_, inTail := tailLive[q]
			return in[q] || inTail
		})
		if err != nil {
			return err
		}
		if below != "" {
			return datastore.Clash(p, below)
		}
	}
	return nil
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

// AtomicClashKind implements dstest.AtomicClashKinds: no clash across
// partitions is refused atomically on S3 yet (see above), so the
// conformance race skips every kind.
func (d *Driver) AtomicClashKind(string) bool { return false }

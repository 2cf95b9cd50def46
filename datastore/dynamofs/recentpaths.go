package dynamofs

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
)

// A head names the paths of its last changes (issue 31). A reader of many
// changed partitions (a sync reading the other namespaces' catalog rows)
// read each one's feed with a Query of the bypos index: in the seed's loop
// of ten workers, about 7.6 of a sync's 20.3 requests. A head that names
// the path at each of its last positions lets the reader get those items
// by key instead, every partition's in one BatchGetItem.
//
// So a plain commit's update of a head also writes attrRecent: the paths
// its last positions changed, oldest first, the last at position "to",
// which the commit sets to the head's new seq (at most recentPaths of
// them and recentBytes of path in all: the head is written by every
// commit of its partition and DynamoDB bills a write by the kilobyte). A
// commit extends the run its head holds when that run ends at the seq it
// read, and starts a new one otherwise. A staged commit moves seq without
// it, which leaves the run ending below seq: a reader then ignores it.
//
// A reader takes the run only if it ends at the seq of the head read and
// reaches back to the reader's position. Each position belongs to one
// path, so the bypos Query of (after, seq] returns exactly the items of
// the run's paths whose position lies there. The reader reads those items
// by key and takes the answer only if each is a plain item (no commit
// stages it) at its path's last position in the run, or past the head
// read (a commit since, whose change the next read returns, and which the
// Query leaves out too): then it is what the Query would have returned. An
// item gone (a purged tombstone), staged, or at a position the run does
// not give its path, and the reader queries that partition as before.
//
// Such an answer needs no floor (datastore.ChangesOfHeads reads the
// floors after the Queries, for a tombstone purged while the feed was
// read): every position of the window is a path whose item was found, at
// that position, at a later one of the window or past the head; a
// tombstone purged at a position with no later change would have left its
// item gone, and the partition queried.
//
// A path the run names for a position that was another path's cannot be
// told from a path changed twice in the run, whose first change is behind
// its item now: a foreign writer that names one can hide that other
// path's change from such a reader, as one that rewrites the items can.
// lake data check names a run's path whose position is another item's,
// and --repair removes the run.

const (
	attrRecent  = "recent" // {"to": N, "p": [S, …]}
	recentPaths = 8
	recentBytes = 512
)

// recentRun is a head's run of recent paths: paths[i] changed position
// to-len(paths)+1+i.
type recentRun struct {
	to    uint64
	paths []string
}

// recentOf returns the run head item h holds, if it is well formed and ends
// at h's seq.
func recentOf(h item) (recentRun, bool) {
	m, ok := h[attrRecent].(*types.AttributeValueMemberM)
	if !ok {
		return recentRun{}, false
	}
	to := getN(m.Value, "to")
	l, ok := m.Value["p"].(*types.AttributeValueMemberL)
	if !ok || to == 0 || to != getN(h, "seq") || uint64(len(l.Value)) > to {
		return recentRun{}, false
	}
	r := recentRun{to: to}
	for _, v := range l.Value {
		s, ok := v.(*types.AttributeValueMemberS)
		if !ok || s.Value == "" {
			return recentRun{}, false
		}
		r.paths = append(r.paths, s.Value)
	}
	return r, true
}

// recentAfter is the run a plain commit that moves head h (as read) to
// seq, its changes the paths changed (in position order, the last at
// seq), writes: h's run extended when it ends where h's seq does, a new
// one otherwise; the oldest dropped past recentPaths or recentBytes.
func recentAfter(h item, seq uint64, changed []string) recentRun {
	var paths []string
	if r, ok := recentOf(h); ok && r.to+uint64(len(changed)) == seq {
		paths = slices.Clone(r.paths)
	}
	paths = append(paths, changed...)
	n := 0
	for i := len(paths) - 1; i >= 0; i-- {
		n += len(paths[i])
		if len(paths)-i > recentPaths || n > recentBytes {
			paths = paths[i+1:]
			break
		}
	}
	return recentRun{to: seq, paths: paths}
}

// withRecent adds to u, a plain commit's update of head h to seq, the
// write of its run after the commit's changed paths.
func withRecent(u expression.UpdateBuilder, h item, seq uint64, changed []string) expression.UpdateBuilder {
	r := recentAfter(h, seq, changed)
	l := &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
	for _, p := range r.paths {
		l.Value = append(l.Value, str(p))
	}
	return u.Set(expression.Name(attrRecent), expression.Value(&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"to": num(r.to), "p": l,
	}}))
}

// recentProblem says what is wrong with the run of head item h, the items
// of its partition being at (position → path) and posOf (path →
// position): a path named at a position another item holds, or at a
// position past its item's (an item's position only grows); "" if
// nothing is.
func recentProblem(h item, at map[uint64]string, posOf map[string]uint64) string {
	r, ok := recentOf(h)
	if !ok {
		return "" // ignored by readers
	}
	first := r.to - uint64(len(r.paths)) + 1
	for i, p := range r.paths {
		pos := first + uint64(i)
		if owner := at[pos]; owner != "" && owner != p {
			return fmt.Sprintf("names %q as the change at position %d, which is %q's (a reader of the feed by these paths misses it)", p, pos, owner)
		}
		if ip, ok := posOf[p]; ok && ip < pos {
			return fmt.Sprintf("names %q as the change at position %d, but its item is at %d", p, pos, ip)
		}
	}
	return ""
}

// recentAge bounds how long a run read by ChangedPartitions waits for the
// feed read: a reader reads the feeds right after.
const recentAge = 5 * time.Second

// offerRecent keeps the run of head item h, read by ChangedPartitions at
// decided seq, for the feed read that follows.
func (d *Driver) offerRecent(h item, seq uint64) {
	key := d.pfx + getS(h, attrSK)
	r, ok := recentOf(h)
	if !ok || r.to != seq || len(r.paths) == 0 {
		d.recent.Drop(key)
		return
	}
	d.recent.Put(key, r)
}

var _ datastore.KeyFeeder = (*Driver)(nil)

// ChangesOfKeys implements datastore.KeyFeeder: the changes after
// after[p] of each head's partition p whose run (offered by the
// ChangedPartitions call that read the heads) ends at the head's Seq and
// reaches back to after[p], read by the run's paths in one BatchGetItem
// for all of them; a partition whose items are not what the run says is
// left out, for its Query.
func (d *Driver) ChangesOfKeys(ctx context.Context, heads []datastore.Head, after map[string]uint64, limit int) (map[string]datastore.HeadChanges, error) {
	type want struct {
		h    datastore.Head
		last map[string]uint64 // path → its last position in the window
	}
	if d.noFeedsByKeys {
		return nil, nil
	}
	var wants []want
	var keys []item
	for _, h := range heads {
		a := after[h.Partition]
		r, ok := d.recent.Get(d.pfx + h.Partition)
		if !ok || r.to != h.Seq || a >= h.Seq || a < h.Floor || a+uint64(len(r.paths)) < r.to {
			continue
		}
		w := want{h: h, last: map[string]uint64{}}
		first := r.to - uint64(len(r.paths)) + 1
		for i, p := range r.paths {
			if pos := first + uint64(i); pos > a {
				if _, seen := w.last[p]; !seen {
					keys = append(keys, key(d.filePK(h.Partition), p))
				}
				w.last[p] = pos
			}
		}
		wants = append(wants, w)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	got, err := d.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	byKey := make(map[string]item, len(got))
	for _, it := range got {
		byKey[itemID(it)] = it
	}
	out := map[string]datastore.HeadChanges{}
	for _, w := range wants {
		var ch []datastore.Info
		whole := true
		for p, pos := range w.last {
			it := byKey[itemID(key(d.filePK(w.h.Partition), p))]
			if it != nil && getS(it, attrTx) == "" && getN(it, attrPos) > w.h.Seq {
				// Changed since the head was read: past the window, as
				// the Query would leave it; the next read has it.
				continue
			}
			if it == nil || getS(it, attrTx) != "" || getN(it, attrPos) != pos {
				whole = false // gone, staged, or not the run's
				break
			}
			ch = append(ch, fileInfo(it))
		}
		if !whole {
			d.meter.count(&d.meter.s.FeedsByKeysMissed)
			continue
		}
		slices.SortFunc(ch, func(x, y datastore.Info) int { return cmp.Compare(x.Pos, y.Pos) })
		upTo := w.h.Seq
		if len(ch) > limit {
			ch = ch[:limit]
			upTo = ch[limit-1].Pos
		}
		out[w.h.Partition] = datastore.HeadChanges{Changes: ch, UpTo: upTo}
		d.meter.count(&d.meter.s.FeedsByKeys)
	}
	return out, nil
}

package s3fs

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// Pending markers: how an acknowledged commit always rolls forward. (In a
// models-v5 datastore only a staged commit's parts are marked: a commit of
// one log object is visible once its head holds it, headcommit.go.)
//
// A commit is its log object's create; rolling it into the path index and
// the head follows, and a committer killed in between leaves a commit that
// is in the log but not in the index (which List reads) nor in the head's
// ETag (which ChangedPartitions compares). Stat and Changes read the log
// after the head's watermark and see it; List and ChangedPartitions would
// not. So before its log create, a commit creates an empty marker
// p/PARTITION/POSITION, and deletes it once its roll-forward is done. List
// (its first page) and ChangedPartitions first list p/ (one LIST, normally
// empty) and settle each marker: the partition is rolled forward, which
// moves its head's ETag, and markers at or below the watermark are
// deleted. A marker above the log's end is a commit in flight, or one that
// died before its create: it is kept for the commit window, then deleted
// (a commit that took longer starts over, see Options.CommitWindow).

// Where the marks live (issue 31). A datastore recorded with the layout
// "models" or "type-id" keeps them under p/ (p/PARTITION/POSITION), so a
// reader that settles them and then compares the heads lists both p/ and
// h/: two LISTs for a sync that finds nothing changed. One recorded
// "models-v2" or later (datastore.LayoutModelsV2, V3 and V4, every
// datastore made since; V3's heads also hold their index, headindex.go)
// keeps them beside the heads, h/PARTITION!pPOSITION, so that one LIST of h/
// returns the heads and the marks. No head's key holds a '!' (the
// partition's name is url.PathEscape'd, which escapes it), so a mark is
// never read as a head, nor a head as a mark; the key is a sibling of the
// head's, not below it, as servers that keep objects as files need. A
// lake that knew only p/ refuses a "models-v2" or later datastore (it
// does not know the layout's name), so no writer of the older format ever marks a commit
// where this one's readers no longer look; and this lake reads p/ only in
// the datastores of the older format, whose writers may still be running.

// markSep separates a partition's escaped name from the position in a
// mark's key beside the heads.
const markSep = "!p"

// marksBesideHeads reports whether d's datastore keeps its pending marks
// under h/ (datastore.LayoutModelsV2 and later) rather than under p/.
func (d *Driver) marksBesideHeads() bool {
	return d.layout == datastore.LayoutModelsV2 || d.headIndexes()
}

// pendingPrefix is the prefix whose LIST returns every pending mark of
// d's namespace (and, beside the heads, the heads too).
func (d *Driver) pendingPrefix() string {
	if d.marksBesideHeads() {
		return d.prefix + "h/"
	}
	return d.prefix + "p/"
}

// pendingKey is the marker of a commit to part at pos.
func (d *Driver) pendingKey(part string, pos uint64) string {
	if d.marksBesideHeads() {
		return fmt.Sprintf("%sh/%s%s%020d", d.prefix, url.PathEscape(part), markSep, pos)
	}
	return fmt.Sprintf("%sp/%s/%020d", d.prefix, url.PathEscape(part), pos)
}

// pendingOf parses a pending mark's key; ok is false for a key that is
// not one (a head's, or a foreign object's).
func (d *Driver) pendingOf(key string) (part string, pos uint64, ok bool) {
	var esc, num string
	if d.marksBesideHeads() {
		rest, found := strings.CutPrefix(key, d.prefix+"h/")
		if !found {
			return "", 0, false
		}
		esc, num, ok = strings.Cut(rest, markSep)
	} else {
		esc, num, ok = strings.Cut(trimPrefix(key, d.prefix+"p/"), "/")
	}
	if !ok || len(num) != 20 {
		return "", 0, false
	}
	part, err := url.PathUnescape(esc)
	if err != nil || datastore.ValidatePartition(part) != nil || url.PathEscape(part) != esc {
		return "", 0, false
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return "", 0, false
		}
	}
	pos, err = strconv.ParseUint(num, 10, 64)
	return part, pos, err == nil && pos > 0
}

// hasMarks reports whether a listing of pendingPrefix holds a mark.
func (d *Driver) hasMarks(keys []listed) bool {
	for _, k := range keys {
		if _, _, ok := d.pendingOf(k.key); ok {
			return true
		}
	}
	return false
}

// markPending creates the marker of a commit to part at pos; it returns
// the marker's ETag, or "" if it already existed (a racing committer's, or
// an earlier attempt's: readers settle it). An existing marker older than
// half the commit window is rewritten, so that readers, which delete a
// marker above the log's end once it is older than the window, never
// delete the one this commit relies on.
func (d *Driver) markPending(ctx context.Context, part string, pos uint64) (string, error) {
	key := d.pendingKey(part, pos)
	etag, err := d.c.create(ctx, key, nil)
	if !errors.Is(err, metastore.ErrConflict) {
		return etag, err
	}
	o, err := d.c.head(ctx, key)
	if errors.Is(err, metastore.ErrNotFound) {
		// Settled meanwhile: create it once more.
		if etag, err := d.c.create(ctx, key, nil); !errors.Is(err, metastore.ErrConflict) {
			return etag, err
		}
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if d.c.clock.now().Sub(o.mod) > d.window/2 {
		if _, err := d.c.replace(ctx, key, o.etag, nil); err != nil && !errors.Is(err, metastore.ErrConflict) {
			return "", err
		}
	}
	return "", nil
}

// clearPending deletes a marker this commit created, once its
// roll-forward is done; a failure leaves it to readers.
func (d *Driver) clearPending(ctx context.Context, part string, pos uint64, etag string) {
	if etag != "" {
		_ = d.c.deleteIf(ctx, d.pendingKey(part, pos), etag)
	}
}

// settlePending rolls forward every partition that has a pending marker,
// and deletes the markers that are settled (see above). It costs one LIST
// when no commit is pending.
func (d *Driver) settlePending(ctx context.Context) error {
	return d.settlePendingAt(ctx, time.Now())
}

// settlePendingAt is settlePending with the caller's clock (Reclaim's), by
// which a staged commit's age is also judged (whole.go).
func (d *Driver) settlePendingAt(ctx context.Context, at time.Time) error {
	keys, err := d.c.listAll(ctx, d.pendingPrefix(), "")
	if err != nil || len(keys) == 0 {
		return err
	}
	_, _, err = d.settleMarks(ctx, keys, at)
	return err
}

// settleMarks settles the marks among keys, a listing of pendingPrefix
// (other keys are skipped: the heads beside the marks, or a foreign
// object, which lake data check reports). It returns keys without the
// marks it found settled, and whether it moved a head (rolled a commit
// forward): if not, the heads in keys are what a listing after it would
// show of every commit acknowledged before keys was listed.
//
// A partition whose head, read now, has applied every marked position
// needs no more (issue 31): each marked commit is in it, rolled forward
// by its committer between the listing and this read (the race every
// reader of a busy namespace meets), so its log is not listed; in the
// seed's loop of ten workers that was a LIST of another namespace's
// catalog log in nearly every other sync, and a second listing of the
// heads after it.
func (d *Driver) settleMarks(ctx context.Context, keys []listed, at time.Time) ([]listed, bool, error) {
	byPart := map[string][]listed{}
	top := map[string]uint64{} // each partition's highest marked position
	var order []string
	for _, k := range keys {
		part, pos, ok := d.pendingOf(k.key)
		if !ok {
			continue // a head, or not a marker: lake data check reports it
		}
		if _, seen := byPart[part]; !seen {
			order = append(order, part)
		}
		byPart[part] = append(byPart[part], k)
		top[part] = max(top[part], pos)
	}
	now := time.Now()
	moved := false
	settled := map[string]bool{}
	for _, part := range order {
		h, etag, exists, err := d.readHead(ctx, part)
		if errors.Is(err, datastore.ErrDamaged) {
			// One damaged partition must not stop every listing and
			// pull of the namespace: its own readers meet the error,
			// which names the object and lake data check.
			continue
		}
		if err != nil {
			return nil, false, err
		}
		end := h.Applied
		if !exists || h.Applied < top[part] {
			t, err := d.tailOf(ctx, part, h, etag, exists, false)
			if errors.Is(err, datastore.ErrDamaged) {
				continue
			}
			if err != nil {
				return nil, false, err
			}
			if t.blocked != nil {
				// A staged commit not decided: give it up if it is dead
				// (whole.go), then read the tail again.
				if err := d.settleTx(ctx, t.blocked.Tx, at); err != nil && !errors.Is(err, errInFlight) {
					return nil, false, err
				}
				if t, err = d.readTail(ctx, part, false); err != nil {
					return nil, false, err
				}
			}
			exists, end = t.exists, t.h.Applied
			if t.exists && len(t.objects) > 0 {
				moved = true
				if err := d.rollForward(ctx, part, t, now); errors.Is(err, datastore.ErrDamaged) {
					continue
				} else if err != nil && !errors.Is(err, errHeadGone) {
					return nil, false, err
				}
				end = t.rollTo()
			}
		}
		for _, k := range byPart[part] {
			_, pos, _ := d.pendingOf(k.key)
			old := d.c.clock.now().Sub(k.mod) > d.window
			if (exists && pos <= end) || old {
				if err := d.c.deleteIf(ctx, k.key, k.etag); err != nil && !errors.Is(err, metastore.ErrConflict) {
					return nil, false, err
				}
				settled[k.key] = true
			}
		}
	}
	rest := keys[:0:0]
	for _, k := range keys {
		if !settled[k.key] {
			rest = append(rest, k)
		}
	}
	return rest, moved, nil
}

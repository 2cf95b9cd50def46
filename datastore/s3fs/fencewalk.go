package s3fs

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/lakemeta/lake/metastore"
)

// fenceWalk is a reader's walk along a partition's log, in position order:
// it remembers the highest token each lock record's fences named in the
// objects walked so far, and says of each object whether its changes count.
// Every reader of a log (a pull, a stat of the tail, the roll-forward, the
// clash check, lake data check) walks it with one, so the rule that hides a
// stale holder's commit is written once.
//
// A fence value above every token its lock ever issued was written by no
// holder (a foreign writer's object, or damage): taken at its word it would
// make every later genuine commit look stale. So when an object would look
// stale, and only then (the common walk reads no record), the walk reads
// the lock record: tokens only grow, so a value above the token the record
// holds now was never issued, and it is ignored, here and in every later
// object that copied it. A missing record, or one that holds no token,
// proves nothing: the walk then keeps the values as they are.
type fenceWalk struct {
	seen  map[string]uint64              // lock record → highest trusted token its fences named so far
	vals  map[string]map[uint64]struct{} // lock record → every value its fences named so far
	limit map[string]uint64              // lock record → the token it holds, once read (0: none)
	token func(context.Context, string) (uint64, error)
}

func newFenceWalk(d *Driver) *fenceWalk {
	return &fenceWalk{seen: map[string]uint64{}, vals: map[string]map[uint64]struct{}{}, token: d.recordToken}
}

// tailWalk is a walk of t.objects: it starts from the fences of the object
// before them when t holds it, so that an object after the applied
// position is judged against the tokens the log had seen before it.
func (d *Driver) tailWalk(t *tail) *fenceWalk {
	w := newFenceWalk(d)
	if t.base != nil {
		w.add(t.base)
	}
	return w
}

// add takes o's fences into account for the objects after it.
func (w *fenceWalk) add(o *logObject) {
	for k, v := range o.Fences {
		if lim, ok := w.limit[k]; ok && lim != 0 && v > lim {
			continue // issued by no holder
		}
		if w.vals[k] == nil {
			w.vals[k] = map[uint64]struct{}{}
		}
		w.vals[k][v] = struct{}{}
		w.seen[k] = max(w.seen[k], v)
	}
}

// counts reports whether o's changes count for a reader: not written under
// a fence older than one the log had already seen from a holder of its
// lock, nor part of an aborted commit (void). It then takes o's fences into
// account for the objects after it, so it must be asked of each object
// once, in order. Its error is a failed read of a lock record.
func (w *fenceWalk) counts(ctx context.Context, o *logObject) (bool, error) {
	stale := false
	if f := o.Fence; f != nil && f.Token != 0 && (f.Token < w.seen[f.Key] || f.Token < o.Fences[f.Key]) {
		lim, err := w.limitOf(ctx, f.Key)
		if err != nil {
			return false, err
		}
		own := o.Fences[f.Key]
		if lim != 0 && own > lim {
			own = 0 // issued by no holder
		}
		stale = f.Token < w.seen[f.Key] || f.Token < own
	}
	w.add(o)
	return !stale && !o.void, nil
}

// limitOf reads (once per walk) the token lock record key holds, and drops
// from what the walk has seen the values above it.
func (w *fenceWalk) limitOf(ctx context.Context, key string) (uint64, error) {
	if w.limit == nil {
		w.limit = map[string]uint64{}
	}
	if lim, ok := w.limit[key]; ok {
		return lim, nil
	}
	lim, err := w.token(ctx, key)
	if err != nil {
		return 0, err
	}
	w.limit[key] = lim
	if lim != 0 && w.seen[key] > lim {
		w.seen[key] = 0
		for v := range w.vals[key] {
			if v <= lim {
				w.seen[key] = max(w.seen[key], v)
			}
		}
	}
	return lim, nil
}

// recordToken returns the token lock record key holds: 0 when it is
// missing or holds no lock record's token (its fences order nothing then).
func (d *Driver) recordToken(ctx context.Context, key string) (uint64, error) {
	o, err := d.c.get(ctx, d.recordKey(key))
	if errors.Is(err, metastore.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var rec struct {
		Token uint64 `json:"token"`
	}
	_ = json.Unmarshal(o.body, &rec) // opaque bytes carry no token
	return rec.Token, nil
}

// eachCounted calls f with each object of t after its applied position
// that counts (the walk above: not stale for a token the log named before
// it), in order, and stops at the first error.
func (d *Driver) eachCounted(ctx context.Context, t *tail, f func(o *logObject) error) error {
	return d.eachCountedOf(ctx, t, t.objects, f)
}

// eachCountedOf is eachCounted over objs, the first of t's objects.
func (d *Driver) eachCountedOf(ctx context.Context, t *tail, objs []*logObject, f func(o *logObject) error) error {
	walk := d.tailWalk(t)
	for _, o := range objs {
		counts, err := walk.counts(ctx, o)
		if err != nil {
			return err
		}
		if counts {
			if err := f(o); err != nil {
				return err
			}
		}
	}
	return nil
}

// tailLive returns the paths of part that t's counted objects change, each
// with whether its last change there leaves it live.
func (d *Driver) tailLive(ctx context.Context, t *tail, part string) (map[string]bool, error) {
	live := map[string]bool{}
	err := d.eachCounted(ctx, t, func(o *logObject) error {
		for _, info := range o.infos(part) {
			live[info.Path] = !info.Deleted
		}
		return nil
	})
	return live, err
}

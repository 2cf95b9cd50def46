package s3fs

import (
	"sync"
	"sync/atomic"
	"time"
)

// offers is what one call of this process leaves, by key, for a later call
// that may take it (a Stat's tail for the next commit of its partition,
// handoff.go; a head's copies of its last objects for the feed read that
// follows, recent.go): each good for age. Nothing takes most of them, so at
// most once every age a new offer drops those too old to be taken: a
// long-lived process (a node serving a fleet's disposable models) keeps
// only the last few seconds' offers, not one for every partition it ever
// read.
type offers struct {
	age   time.Duration
	m     sync.Map     // key → *offer (a pointer: CompareAndDelete compares it, whatever v is)
	swept atomic.Int64 // when put last dropped the old ones (Unix ns)
}

type offer struct {
	v  any
	at time.Time
}

// put offers v under key.
func (o *offers) put(key string, v any) {
	now := time.Now()
	o.m.Store(key, &offer{v: v, at: now})
	last := o.swept.Load()
	if now.Sub(time.Unix(0, last)) < o.age || !o.swept.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	o.m.Range(func(k, v any) bool {
		if now.Sub(v.(*offer).at) > o.age {
			o.m.CompareAndDelete(k, v)
		}
		return true
	})
}

// get returns the offer under key if it is not too old, and keeps it.
func (o *offers) get(key string) (any, bool) {
	v, ok := o.m.Load(key)
	if !ok || time.Since(v.(*offer).at) > o.age {
		return nil, false
	}
	return v.(*offer).v, true
}

// take returns the offer under key if it is not too old, and removes it.
func (o *offers) take(key string) (any, bool) {
	v, ok := o.m.LoadAndDelete(key)
	if !ok || time.Since(v.(*offer).at) > o.age {
		return nil, false
	}
	return v.(*offer).v, true
}

// drop removes the offer under key.
func (o *offers) drop(key string) { o.m.Delete(key) }

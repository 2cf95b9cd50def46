// Package offers keeps what one call of a process leaves, by key, for a
// later call that may take it: a Stat's tail for the next commit of its
// partition, a head's copies of its last changes for the feed read that
// follows. Each offer is good for an age; nothing takes most of them, so
// at most once every age a new offer drops those too old to be taken, and
// a long-lived process (a node serving a fleet's disposable models) keeps
// only the last few seconds' offers, not one for every key it ever read.
package offers

import (
	"sync"
	"sync/atomic"
	"time"
)

// Shelf holds offers of type V by key. Its zero value is not usable: make
// one with New.
type Shelf[V any] struct {
	age   time.Duration
	m     sync.Map     // key → *offer[V] (a pointer: CompareAndDelete compares it, whatever V is)
	swept atomic.Int64 // when Put last dropped the old ones (Unix ns)
}

type offer[V any] struct {
	v  V
	at time.Time
}

// New returns an empty shelf whose offers are good for age.
func New[V any](age time.Duration) *Shelf[V] { return &Shelf[V]{age: age} }

// Put offers v under key.
func (s *Shelf[V]) Put(key string, v V) { s.putAt(key, v, time.Now()) }

// PutAt offers v under key as of at: an offer that vouches for an earlier
// instant (what a request sent then found) is that much older.
func (s *Shelf[V]) PutAt(key string, v V, at time.Time) { s.putAt(key, v, at) }

// putAt is Put as if made at now.
func (s *Shelf[V]) putAt(key string, v V, now time.Time) {
	s.m.Store(key, &offer[V]{v: v, at: now})
	last := s.swept.Load()
	if now.Sub(time.Unix(0, last)) < s.age || !s.swept.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	s.m.Range(func(k, o any) bool {
		if now.Sub(o.(*offer[V]).at) > s.age {
			s.m.CompareAndDelete(k, o)
		}
		return true
	})
}

// Get returns the offer under key if it is not too old, and keeps it.
func (s *Shelf[V]) Get(key string) (V, bool) {
	o, ok := s.m.Load(key)
	return s.fresh(o, ok)
}

// Take returns the offer under key if it is not too old, and removes it.
func (s *Shelf[V]) Take(key string) (V, bool) {
	o, ok := s.m.LoadAndDelete(key)
	return s.fresh(o, ok)
}

func (s *Shelf[V]) fresh(o any, ok bool) (V, bool) {
	if !ok || time.Since(o.(*offer[V]).at) > s.age {
		var zero V
		return zero, false
	}
	return o.(*offer[V]).v, true
}

// Drop removes the offer under key.
func (s *Shelf[V]) Drop(key string) { s.m.Delete(key) }

// Len is how many offers the shelf holds, too old ones included.
func (s *Shelf[V]) Len() int {
	n := 0
	s.m.Range(func(_, _ any) bool { n++; return true })
	return n
}

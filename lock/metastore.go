package lock

import (
	"context"
	"strings"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// BackstopAfter is how long after its last write a lock record, and after
// its expiry an expiry record, may be deleted by a store's own time to live
// (DynamoDB's TTL on the attribute "expires", which lake's change log uses
// too; metastore.WithExpiry). It is a backstop for the records of holders
// that died and of names no one takes again, never the mechanism: a record
// deleted at any time after that bound changes nothing any holder or waiter
// concludes, since tokens come from the namespace's generation counter,
// which no TTL touches. A holder re-stamps its lock record every
// RestampEvery, so a lock held for weeks keeps its record.
const BackstopAfter = 7 * 24 * time.Hour

// RestampEvery is how often a holder rewrites its unchanged lock record to
// move its backstop on (one write a day per held lock).
const RestampEvery = 24 * time.Hour

// KeyPrefix is the prefix under which the metastore adapter keeps lock
// records: lock/rec/NS/NAME, lock/exp/NS/NAME and lock/gen/NS. It is lake's
// own, distinct from lease/, which is user metadata.
const KeyPrefix = "lock/"

// MetaStorage is the Storage of a *metastore.Store, and so of every
// metastore backend (bolt, DynamoDB in every layout and migration state, a
// remote node). Its fenced writes are GuardedMutate guarded on the lock
// record's exact bytes.
type MetaStorage struct {
	s *metastore.Store
}

// Metastore returns the lock storage of s.
func Metastore(s *metastore.Store) *MetaStorage { return &MetaStorage{s: s} }

var (
	_ Storage        = (*MetaStorage)(nil)
	_ ResourceWriter = (*MetaStorage)(nil)
)

// Get implements Storage.
func (m *MetaStorage) Get(ctx context.Context, key string) ([]byte, error) {
	return m.s.Get(ctx, KeyPrefix+key)
}

// Create implements Storage with a CAS that expects the key absent.
func (m *MetaStorage) Create(ctx context.Context, key string, value []byte) error {
	return m.s.CAS(backstop(ctx, key, value), KeyPrefix+key, metastore.ExpectAbsent(), value)
}

// Swap implements Storage with a CAS.
func (m *MetaStorage) Swap(ctx context.Context, key string, old, value []byte) error {
	return m.s.CAS(backstop(ctx, key, value), KeyPrefix+key, metastore.ExpectValue(old), value)
}

// backstop returns ctx with the TTL hint of a write of value at key: a lock
// record BackstopAfter after now, an expiry record BackstopAfter after its
// expiry, the generation counter never.
func backstop(ctx context.Context, key string, value []byte) context.Context {
	switch {
	case strings.HasPrefix(key, "rec/"):
		return metastore.WithExpiry(ctx, time.Now().Add(BackstopAfter))
	case strings.HasPrefix(key, "exp/"):
		e, err := decodeExpiry(key, value)
		if err != nil || e.Expires.IsZero() {
			return ctx
		}
		return metastore.WithExpiry(ctx, e.Expires.Add(BackstopAfter))
	default:
		return ctx
	}
}

// List implements Storage with ListAll.
func (m *MetaStorage) List(ctx context.Context, prefix string) ([]Record, error) {
	items, err := m.s.ListAll(ctx, KeyPrefix+prefix)
	if err != nil {
		return nil, err
	}
	out := make([]Record, len(items))
	for i, it := range items {
		out[i] = Record{Key: strings.TrimPrefix(it.Key, KeyPrefix), Value: it.Value}
	}
	return out, nil
}

// Fenced implements Storage with GuardedMutate.
func (m *MetaStorage) Fenced(ctx context.Context, fence Record, mu Mutation) error {
	exp := metastore.ExpectAbsent()
	if mu.Old != nil {
		exp = metastore.ExpectValue(mu.Old)
	}
	return m.s.GuardedMutate(backstop(ctx, mu.Key, mu.Value), metastore.Guard{Key: KeyPrefix + fence.Key, Value: fence.Value},
		metastore.Mutation{Key: KeyPrefix + mu.Key, Expect: exp, Value: mu.Value})
}

// WriteFenced implements ResourceWriter: m, a mutation of any user key, is
// applied only while the lock record holds exactly fence.Value.
func (m *MetaStorage) WriteFenced(ctx context.Context, fence Record, mu metastore.Mutation) error {
	return m.s.GuardedMutate(ctx, metastore.Guard{Key: KeyPrefix + fence.Key, Value: fence.Value}, mu)
}

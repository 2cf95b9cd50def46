// Package dslock puts the lock package's locks in a datastore's own records,
// so that the datastore's locks live beside its files and a commit can be
// fenced on a lock record in the same atomic write as its entries (pass
// Fence(lease) as the commit's fence). It is a package of its own so that
// neither datastore nor lock imports the other.
package dslock

import (
	"context"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/metastore"
)

// Storage is the lock package's storage over a datastore's own records,
// so that the datastore's locks live beside its files and a commit can be
// fenced on a lock record in the same atomic write as its entries (pass
// Lease.Fence() as the commit's Fence). The lock's keys are used as they
// are: the records are a keyspace of the datastore's own, apart from its
// paths. It is a lock.Clock: the storage's own clock where the driver has
// one (S3's), so that a Locker stamps its records and judges expiry by the
// one clock every host reads; the host's elsewhere.
type Storage struct {
	r   datastore.Records
	now func() time.Time
}

var (
	_ lock.Storage = Storage{}
	_ lock.Clock   = Storage{}
)

// New returns the lock storage of s.
func New(s *datastore.Store) Storage {
	now := s.ServerNow()
	if now == nil {
		now = time.Now
	}
	return Storage{r: s.Records(), now: now}
}

// Now implements lock.Clock.
func (l Storage) Now() time.Time {
	if l.now == nil {
		return time.Now()
	}
	return l.now()
}

// Fence returns the commit fence of a lock lease: its lock record's exact
// bytes.
func Fence(ls *lock.Lease) *datastore.Fence {
	f := ls.Fence()
	return &datastore.Fence{Key: f.Key, Token: f.Value}
}

// Get implements lock.Storage.
func (l Storage) Get(ctx context.Context, key string) ([]byte, error) {
	return l.r.GetRecord(ctx, key)
}

// Create implements lock.Storage with a CAS that expects the record absent.
func (l Storage) Create(ctx context.Context, key string, value []byte) error {
	return l.r.CASRecord(ctx, key, metastore.ExpectAbsent(), value)
}

// Swap implements lock.Storage with a CAS on the exact old bytes.
func (l Storage) Swap(ctx context.Context, key string, old, value []byte) error {
	return l.r.CASRecord(ctx, key, metastore.ExpectValue(old), value)
}

// List implements lock.Storage. The lock lists "rec/NS/" and "exp/NS/",
// which name the two segments ListRecords requires.
func (l Storage) List(ctx context.Context, prefix string) ([]lock.Record, error) {
	items, err := l.r.ListRecords(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]lock.Record, len(items))
	for i, it := range items {
		out[i] = lock.Record{Key: it.Key, Value: it.Value}
	}
	return out, nil
}

// Fenced implements lock.Storage with FencedRecord.
func (l Storage) Fenced(ctx context.Context, fence lock.Record, m lock.Mutation) error {
	exp := metastore.ExpectAbsent()
	if m.Old != nil {
		exp = metastore.ExpectValue(m.Old)
	}
	return l.r.FencedRecord(ctx, datastore.Fence{Key: fence.Key, Token: fence.Value}, m.Key, exp, m.Value)
}

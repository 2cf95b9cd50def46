package s3fs

import (
	"context"
	"strings"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/metastore"
)

// LockPrefix is the record prefix of the locks of an S3 datastore: a lock
// record rec/NS/NAME of the lock package is the datastore record
// lock/rec/NS/NAME, object PREFIX/r/lock/rec/NS/NAME.
const LockPrefix = "lock/"

// LockStorage is the lock package's Storage on an S3 datastore, so that the
// lock's algorithm and tokens are the lock package's, unchanged. Every
// request it sends is conditional: Create is a PutObject with
// If-None-Match: *, Swap a PutObject with If-Match on the ETag of the value
// compared, Fenced the check, conditional write and re-check of
// FencedRecord; nothing is ever overwritten or deleted unconditionally.
type LockStorage struct{ d *Driver }

var (
	_ lock.Storage = LockStorage{}
	_ lock.Clock   = LockStorage{}
)

// Now implements lock.Clock: S3's clock as estimated from the Date of its
// responses, so that a holder's expiry is written and judged by the
// server's clock, not by each host's.
func (l LockStorage) Now() time.Time { return l.d.c.clock.now() }

// Locks returns the lock storage of d.
func (d *Driver) Locks() LockStorage { return LockStorage{d} }

// FenceOf returns the datastore fence of a lock fence (lock.Record, the lock
// record and the exact bytes it holds): the commit fence of a holder.
func FenceOf(r lock.Record) datastore.Fence {
	return datastore.Fence{Key: LockPrefix + r.Key, Token: r.Value}
}

// Get implements lock.Storage.
func (l LockStorage) Get(ctx context.Context, key string) ([]byte, error) {
	return l.d.GetRecord(ctx, LockPrefix+key)
}

// Create implements lock.Storage.
func (l LockStorage) Create(ctx context.Context, key string, value []byte) error {
	return l.d.CASRecord(ctx, LockPrefix+key, metastore.ExpectAbsent(), value)
}

// Swap implements lock.Storage.
func (l LockStorage) Swap(ctx context.Context, key string, old, value []byte) error {
	return l.d.CASRecord(ctx, LockPrefix+key, metastore.ExpectValue(old), value)
}

// List implements lock.Storage.
func (l LockStorage) List(ctx context.Context, prefix string) ([]lock.Record, error) {
	items, err := l.d.ListRecords(ctx, LockPrefix+prefix)
	if err != nil {
		return nil, err
	}
	out := make([]lock.Record, len(items))
	for i, it := range items {
		out[i] = lock.Record{Key: strings.TrimPrefix(it.Key, LockPrefix), Value: it.Value}
	}
	return out, nil
}

// Fenced implements lock.Storage with FencedRecord.
func (l LockStorage) Fenced(ctx context.Context, fence lock.Record, m lock.Mutation) error {
	exp := metastore.ExpectAbsent()
	if m.Old != nil {
		exp = metastore.ExpectValue(m.Old)
	}
	return l.d.FencedRecord(ctx, FenceOf(fence), LockPrefix+m.Key, exp, m.Value)
}

package main

import (
	"context"
	"sync"
	"time"

	"github.com/lakemeta/lake/backend/boltstore"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/boltfs"
	"github.com/lakemeta/lake/metastore"
)

// lazyBolt is the node's datastore driver on its bolt file, made at the
// first datastore request rather than at start: making it creates the
// datastore's buckets, a write, and a node that only serves reads of a
// damaged file must leave the file as it found it. A poisoned metastore
// (damage met) refuses to make it.
type lazyBolt struct {
	ms   *boltstore.Driver
	once sync.Once
	d    *boltfs.Driver
	err  error
}

var _ datastore.Driver = (*lazyBolt)(nil)

func (l *lazyBolt) get() (*boltfs.Driver, error) {
	l.once.Do(func() {
		if l.err = l.ms.Poisoned(); l.err == nil {
			l.d, l.err = boltfs.New(l.ms.DB())
		}
	})
	return l.d, l.err
}

func (l *lazyBolt) Name() string { return boltfs.Name }

func (l *lazyBolt) MaxCommit() int {
	d, err := l.get()
	if err != nil {
		return 1 // every call fails anyway
	}
	return d.MaxCommit()
}

func (l *lazyBolt) BeginUpload(ctx context.Context, s datastore.Staged) error {
	d, err := l.get()
	if err != nil {
		return err
	}
	return d.BeginUpload(ctx, s)
}

func (l *lazyBolt) PutChunk(ctx context.Context, version string, i int, data []byte) error {
	d, err := l.get()
	if err != nil {
		return err
	}
	return d.PutChunk(ctx, version, i, data)
}

func (l *lazyBolt) GetChunk(ctx context.Context, version string, i int) ([]byte, error) {
	d, err := l.get()
	if err != nil {
		return nil, err
	}
	return d.GetChunk(ctx, version, i)
}

func (l *lazyBolt) Commit(ctx context.Context, fence *datastore.Fence, entries []datastore.Entry, now time.Time) ([]datastore.Info, error) {
	d, err := l.get()
	if err != nil {
		return nil, err
	}
	return d.Commit(ctx, fence, entries, now)
}

func (l *lazyBolt) Stat(ctx context.Context, paths []string) (map[string]datastore.Info, error) {
	d, err := l.get()
	if err != nil {
		return nil, err
	}
	return d.Stat(ctx, paths)
}

func (l *lazyBolt) List(ctx context.Context, prefix string, limit int, pos []byte) ([]datastore.Info, []byte, error) {
	d, err := l.get()
	if err != nil {
		return nil, nil, err
	}
	return d.List(ctx, prefix, limit, pos)
}

func (l *lazyBolt) Head(ctx context.Context, partition string) (datastore.Head, error) {
	d, err := l.get()
	if err != nil {
		return datastore.Head{}, err
	}
	return d.Head(ctx, partition)
}

func (l *lazyBolt) Changes(ctx context.Context, partition string, after uint64, limit int) ([]datastore.Info, uint64, error) {
	d, err := l.get()
	if err != nil {
		return nil, 0, err
	}
	return d.Changes(ctx, partition, after, limit)
}

func (l *lazyBolt) Partitions(ctx context.Context) ([]string, error) {
	d, err := l.get()
	if err != nil {
		return nil, err
	}
	return d.Partitions(ctx)
}

func (l *lazyBolt) ChangedPartitions(ctx context.Context, cursor []byte) ([]datastore.Head, []byte, error) {
	d, err := l.get()
	if err != nil {
		return nil, nil, err
	}
	return d.ChangedPartitions(ctx, cursor)
}

func (l *lazyBolt) Reclaim(ctx context.Context, now time.Time, o datastore.ReclaimOptions) (datastore.ReclaimStats, error) {
	d, err := l.get()
	if err != nil {
		return datastore.ReclaimStats{}, err
	}
	return d.Reclaim(ctx, now, o)
}

func (l *lazyBolt) Namespace(name string) (datastore.Driver, error) {
	d, err := l.get()
	if err != nil {
		return nil, err
	}
	return d.Namespace(name)
}

func (l *lazyBolt) DropPartition(ctx context.Context, fence *datastore.Fence, partition string, now time.Time) (datastore.DropStats, error) {
	d, err := l.get()
	if err != nil {
		return datastore.DropStats{}, err
	}
	return d.DropPartition(ctx, fence, partition, now)
}

func (l *lazyBolt) GetRecord(ctx context.Context, key string) ([]byte, error) {
	d, err := l.get()
	if err != nil {
		return nil, err
	}
	return d.GetRecord(ctx, key)
}

func (l *lazyBolt) CASRecord(ctx context.Context, key string, expect metastore.Expect, value []byte) error {
	d, err := l.get()
	if err != nil {
		return err
	}
	return d.CASRecord(ctx, key, expect, value)
}

func (l *lazyBolt) DeleteRecord(ctx context.Context, key string, expected []byte) error {
	d, err := l.get()
	if err != nil {
		return err
	}
	return d.DeleteRecord(ctx, key, expected)
}

func (l *lazyBolt) ListRecords(ctx context.Context, prefix string) ([]metastore.Item, error) {
	d, err := l.get()
	if err != nil {
		return nil, err
	}
	return d.ListRecords(ctx, prefix)
}

func (l *lazyBolt) FencedRecord(ctx context.Context, fence datastore.Fence, key string, expect metastore.Expect, value []byte) error {
	d, err := l.get()
	if err != nil {
		return err
	}
	return d.FencedRecord(ctx, fence, key, expect, value)
}

// Close closes the datastore driver if it was made; the file is the
// metastore's to close.
func (l *lazyBolt) Close() error {
	// Waits for a making in flight; if none happened, none will.
	l.once.Do(func() { l.err = metastore.ErrClosed })
	if l.d != nil {
		return l.d.Close()
	}
	return nil
}

package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dslock"
	"github.com/lakemeta/lake/datastore/dsurl"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/metastore"
)

// withLocks runs fn with the lock storage of --store: the metastore's, or,
// for s3://BUCKET/PREFIX, the S3 datastore's own records, the very records
// `lake data sync` and `lake data lock` use (dslock), so that `lake lock run
// NS/sync` excludes the namespace's syncs; the metastore cannot be on S3.
func (g *globalOptions) withLocks(ctx context.Context, fn func(lock.Storage) error) error {
	return g.withFencedLocks(ctx, func(st lock.Storage, _ takeoverFence) error { return fn(st) })
}

// takeoverFence is what a command that acquired the lock name calls when
// its acquisition broke another holder (lock.Lease.TookOver), before it
// acts: nil where nothing needs fencing.
type takeoverFence func(ctx context.Context, name string, ls *lock.Lease) error

// withFencedLocks is withLocks that also hands fn the takeover fence of the
// store. On S3 a namespace's commits are fenced per partition, so a holder
// that took NAMESPACE/sync over fences the namespace first, as `lake data
// sync` does (datastore.Store.FenceTakeover): a broken holder's commit then
// lands before the new holder acts or not at all. Other stores fence every
// commit in its own write and need nothing.
func (g *globalOptions) withFencedLocks(ctx context.Context, fn func(lock.Storage, takeoverFence) error) error {
	if !strings.HasPrefix(g.store, "s3://") {
		return g.withStore(ctx, func(s *metastore.Store) error { return fn(lock.Metastore(s), nil) })
	}
	s, err := dsurl.Open(ctx, g.store, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, ok := s.Driver().(*s3fs.Driver); !ok {
		return fmt.Errorf("lake: %s did not open an s3 datastore", g.store)
	}
	fence := func(ctx context.Context, name string, ls *lock.Lease) error {
		ns, ok := strings.CutSuffix(name, "/sync")
		if !ok || datastore.ValidateNamespace(ns) != nil && ns != datastore.DefaultNamespace {
			return nil // a lock of the user's own: nothing of lake's to fence
		}
		nss, err := s.Namespace(ns)
		if err != nil {
			return err
		}
		_, err = nss.FenceTakeover(ctx, dslock.Fence(ls))
		return err
	}
	return fn(dslock.New(s), fence)
}

// withLockReader is withLocks for a command that only reads the locks: a
// bolt file is opened read-only (a shared lock) and keeps every byte.
func (g *globalOptions) withLockReader(ctx context.Context, fn func(lock.Storage) error) error {
	if strings.HasPrefix(g.store, "s3://") {
		return g.withLocks(ctx, fn)
	}
	s, err := g.openReader(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	return fn(lock.Metastore(s))
}

package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/lakemeta/lake/datastore/dsurl"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/metastore"
)

// withLocks runs fn with the lock storage of --store: the metastore's, or,
// for s3://BUCKET/PREFIX, the S3 datastore's (where the locks of `lake data`
// on S3 live, and which the metastore cannot be).
func (g *globalOptions) withLocks(ctx context.Context, fn func(lock.Storage) error) error {
	if !strings.HasPrefix(g.store, "s3://") {
		return g.withStore(ctx, func(s *metastore.Store) error { return fn(lock.Metastore(s)) })
	}
	s, err := dsurl.Open(ctx, g.store, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	d, ok := s.Driver().(*s3fs.Driver)
	if !ok {
		return fmt.Errorf("lake: %s did not open an s3 datastore", g.store)
	}
	return fn(d.Locks())
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

package treesync_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dslock"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/treesync"
)

// deadStorage is a lock storage whose writes fail once dead is set: the
// holder that acquired through it can no longer renew or release, as if
// its process had been stopped, and its record stays held.
type deadStorage struct {
	lock.Storage
	dead atomic.Bool
}

func (d *deadStorage) fail() error {
	if d.dead.Load() {
		return metastore.ErrUnavailable
	}
	return nil
}

func (d *deadStorage) Swap(ctx context.Context, key string, old, value []byte) error {
	if err := d.fail(); err != nil {
		return err
	}
	return d.Storage.Swap(ctx, key, old, value)
}

func (d *deadStorage) Fenced(ctx context.Context, fence lock.Record, m lock.Mutation) error {
	if err := d.fail(); err != nil {
		return err
	}
	return d.Storage.Fenced(ctx, fence, m)
}

// TestSyncFencesAfterTakeoverOnS3 (issue 28, row 1): lake data sync on S3
// that takes the lock over from a holder that stopped appends a fence
// entry to every partition of the namespace before it reads, under its own
// token, so that the stopped holder's late commit is refused; a sync that
// acquires a released lock sends no fence entry.
func TestSyncFencesAfterTakeoverOnS3(t *testing.T) {
	ctx := t.Context()
	d, err := s3fs.Open(ctx, s3local.Client(t), s3fs.Options{Bucket: s3local.Bucket(t), Prefix: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	s := datastore.New(d)
	t.Cleanup(func() { s.Close() })
	// The trees hold the lock for long leases, so that a slow run (-race)
	// never lets one run out before its release; the stopped holder below
	// has a short one, taken over quickly.
	slow := &treesync.Options{Lock: &lock.Options{Lease: 20 * time.Second, ClockSkew: 50 * time.Millisecond, Wait: 30 * time.Second}}
	a := newTree(t, s, slow)
	write(t, a, "data/m/1/f", "one")
	write(t, a, "data/n/1/g", "one")
	if _, err := a.Sync(ctx, treesync.Scope{}); err != nil {
		t.Fatal(err)
	}
	seq := func(part string) uint64 {
		h, err := s.Head(ctx, part)
		if err != nil {
			t.Fatal(err)
		}
		return h.Seq
	}
	m0, n0 := seq("m/1"), seq("n/1")

	// A released lock: no fence entry.
	b := newTree(t, s, &treesync.Options{Lock: slow.Lock})
	if _, err := b.Sync(ctx, treesync.Scope{}); err != nil {
		t.Fatal(err)
	}
	if seq("m/1") != m0 || seq("n/1") != n0 {
		t.Fatalf("a sync after a release moved the heads: m/1 %d→%d, n/1 %d→%d", m0, seq("m/1"), n0, seq("n/1"))
	}

	// A holder that stops holding the lock.
	ds := &deadStorage{Storage: dslock.New(s)}
	stopped, err := lock.New(ds, fastLock)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := stopped.Acquire(ctx, a.LockName())
	if err != nil {
		t.Fatal(err)
	}
	ds.dead.Store(true)
	st, err := s.Upload(ctx, "data/m/1/f", strings.NewReader("stale"), nil)
	if err != nil {
		t.Fatal(err)
	}

	write(t, b, "data/n/1/g", "two")
	rep, err := b.Sync(ctx, treesync.Scope{})
	if err != nil {
		t.Fatalf("sync taking the lock over: %v", err)
	}
	if rep.Committed != 1 {
		t.Fatalf("committed %d, want 1", rep.Committed)
	}
	if seq("m/1") != m0+1 || seq("n/1") != n0+2 {
		t.Fatalf("after the takeover: m/1 %d→%d (want a fence entry), n/1 %d→%d (want a fence entry and the commit)", m0, seq("m/1"), n0, seq("n/1"))
	}
	// The stopped holder wakes up and commits under its old token: refused.
	if _, err := s.Commit(ctx, dslock.Fence(ls), []datastore.Entry{{Put: &st}}); !datastore.IsFenceConflict(err) {
		t.Fatalf("the stopped holder's late commit: %v, want a fence conflict", err)
	}
	if info, err := s.Stat(ctx, "data/m/1/f"); err != nil || info.Version == st.Version {
		t.Fatalf("the stale commit is visible: %+v, %v", info, err)
	}
}

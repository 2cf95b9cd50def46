package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// TestWriteConflictIsNotLoss: a fenced write whose own expectation fails
// is a conflict, not a loss; the lease stays held.
func TestWriteConflictIsNotLoss(t *testing.T) {
	s := newBolt(t)
	ctx := context.Background()
	ls, err := newLocker(t, Metastore(s), Options{Lease: time.Minute}).Acquire(ctx, "ns/w")
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(ctx)
	if err := s.Put(ctx, "data/x", []byte("a")); err != nil {
		t.Fatal(err)
	}
	err = ls.Write(ctx, metastore.Mutation{Key: "data/x", Expect: metastore.ExpectValue([]byte("b")), Value: []byte("c")})
	if !errors.Is(err, metastore.ErrConflict) || errors.Is(err, ErrLost) || ls.Err() != nil {
		t.Fatalf("write with a wrong expectation: %v (lease: %v)", err, ls.Err())
	}
	if err := ls.Write(ctx, metastore.Mutation{Key: "data/x", Expect: metastore.ExpectValue([]byte("a")), Value: []byte("c")}); err != nil {
		t.Fatal(err)
	}
}

// TestWithLockReportsLoss: a lock lost while fn runs cancels fn's context
// and makes WithLock's error match ErrLost even though fn returned nil.
func TestWithLockReportsLoss(t *testing.T) {
	s := newBolt(t)
	ctx := context.Background()
	l := newLocker(t, Metastore(s), Options{Lease: 300 * time.Millisecond})
	breaker := newLocker(t, Metastore(s), Options{})
	err := l.WithLock(ctx, "ns/wl", func(ctx context.Context, ls *Lease) error {
		if err := breaker.ForceRelease(context.Background(), "ns/wl", ls.Token()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("fn's context was never cancelled")
		}
	})
	if !errors.Is(err, ErrLost) {
		t.Fatalf("WithLock = %v, want ErrLost", err)
	}
	// The lock is free for the next holder.
	if err := l.WithLock(ctx, "ns/wl", func(context.Context, *Lease) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

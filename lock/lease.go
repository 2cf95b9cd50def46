package lock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lakemeta/lake/internal/lakeerr"
	"github.com/lakemeta/lake/metastore"
)

// Lease is a held lock. Its context is cancelled, with ErrLost as the
// cause, the moment the lock is lost: when its lease runs out without a
// confirmed renewal (counted on this process's monotonic clock from the
// instant the last confirmed write was sent), or when a read shows that
// another holder took it over or a forced release broke it. Fenced writes
// through the lease are then refused, by the lease and by the store.
type Lease struct {
	l     *Locker
	n     lockName
	rec   lockRecord
	fence Record // the lock record as written: what fenced writes guard on

	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{}
	done   chan struct{}

	mu       sync.Mutex
	deadline time.Time // monotonic: the lease runs out here
	timer    *time.Timer
	exp      []byte // the expiry record as last known; nil: unknown
	expKnown bool
	stamped  time.Time // when the lock record was last written (see restamp)

	releaseOnce sync.Once
	releaseErr  error

	contended int
	tookOver  bool
}

func (ls *Lease) withContended(n int) *Lease {
	ls.contended = n
	return ls
}

// Contended is how many times the acquisition found the lock held by
// another holder or lost a race for it to another acquirer: zero means it
// waited for no one (its wait was its own requests).
func (ls *Lease) Contended() int { return ls.contended }

// TookOver reports whether the acquisition broke another holder: it
// replaced a record still held (a takeover of an expired lease), the free
// record of a forced release, or a missing record. The holder it replaced
// may still be running and may still send a write it checked before the
// takeover; a store whose writes cannot check the fence atomically (S3)
// needs the new holder to fence what it will read first
// (datastore.Store.FenceTakeover).
func (ls *Lease) TookOver() bool { return ls.tookOver }

// hold starts the lease of a successful acquisition.
func (l *Locker) hold(n lockName, at *attempt) *Lease {
	l.remember(n, at.value)
	ctx, cancel := context.WithCancelCause(context.Background())
	ls := &Lease{
		l: l, n: n, rec: at.rec, fence: Record{n.lockKey(), at.value},
		ctx: ctx, cancel: cancel, stop: make(chan struct{}), done: make(chan struct{}),
		deadline: at.sent.Add(l.opts.Lease), exp: at.exp, expKnown: at.exp != nil, stamped: at.sent,
		tookOver: at.broke,
	}
	ls.timer = time.AfterFunc(time.Until(ls.deadline), ls.checkDeadline)
	go ls.heartbeat()
	return ls
}

// Name is the lock's NAMESPACE/NAME.
func (ls *Lease) Name() string { return ls.n.String() }

// Token is the fencing token of this acquisition; give it to resources
// outside lake so that they can refuse a smaller one.
func (ls *Lease) Token() Token { return ls.rec.Token }

// Fence is the lock record as this holder wrote it: a store that can guard
// a write on a record's exact bytes fences a write with it.
func (ls *Lease) Fence() Record { return Record{ls.fence.Key, bytes.Clone(ls.fence.Value)} }

// Context is cancelled when the lock is lost or released; context.Cause
// tells which (ErrLost, ErrReleased).
func (ls *Lease) Context() context.Context { return ls.ctx }

// Err is nil while the lock is held, else ErrLost or ErrReleased.
func (ls *Lease) Err() error {
	if ls.ctx.Err() == nil {
		return nil
	}
	return context.Cause(ls.ctx)
}

// Deadline is the monotonic instant at which the lease runs out unless a
// renewal is confirmed first.
func (ls *Lease) Deadline() time.Time {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.deadline
}

func (ls *Lease) lose(why string) {
	ls.cancel(fmt.Errorf("%w: %s: %s", ErrLost, ls.n, why))
}

// checkDeadline runs when the lease timer fires; a renewal confirmed in the
// meantime moved the deadline, and then the timer is re-armed.
func (ls *Lease) checkDeadline() {
	ls.mu.Lock()
	d := time.Until(ls.deadline)
	if d > 0 {
		ls.timer.Reset(d)
		ls.mu.Unlock()
		return
	}
	ls.mu.Unlock()
	ls.lose("the lease ran out without a confirmed renewal")
}

func (ls *Lease) heartbeat() {
	defer close(ls.done)
	t := time.NewTicker(ls.l.opts.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ls.stop:
			return
		case <-ls.ctx.Done():
			return
		case <-t.C:
			ls.renew()
		}
	}
}

// renew extends the lease with one write to the expiry record, fenced on
// the lock record: the lock record itself never changes while held, so a
// fenced write of the holder's own in flight is never refused by a
// renewal. A refusal because writes are paused, or a write whose outcome is
// unknown, is retried and read back until the lease runs out; a failed
// fence is a loss.
func (ls *Lease) renew() {
	sent := time.Now()
	val := encode(expiryRecord{Token: ls.rec.Token, Expires: wall(ls.l.wallNow().Add(ls.l.opts.Lease))})
	b := newBackoff(ls.l.opts.Lease)
	ctx := ls.ctx
	for ctx.Err() == nil {
		ls.mu.Lock()
		old, known := ls.exp, ls.expKnown
		ls.mu.Unlock()
		var err error
		if !known {
			old, err = ls.l.get(ctx, ls.n.expiryKey())
		}
		if err == nil {
			ls.setExp(old, true)
			err = ls.l.st.Fenced(ctx, ls.fence, Mutation{Key: ls.n.expiryKey(), Old: old, Value: val})
		}
		if err == nil {
			ls.confirm(sent, val)
			ls.restamp(ctx)
			return
		}
		ls.setExp(nil, false)
		// Read back: the lock record says whether the lock is still ours,
		// the expiry record whether a write of unknown outcome applied.
		lost, rerr := ls.readBack(ctx, sent, val)
		if lost || (rerr == nil && ls.confirmed(val)) {
			return
		}
		if rerr == nil && errors.Is(err, metastore.ErrConflict) {
			continue // the expiry record had changed: retry on what was read
		}
		b.sleep(ctx, ls.Deadline())
	}
}

// restampEvery is RestampEvery; tests shorten it.
var restampEvery = RestampEvery

// restamp rewrites the unchanged lock record once every restampEvery, so
// that a store's TTL backstop (BackstopAfter) never deletes the record of a
// lock still held. The bytes do not change, so no fenced write in flight is
// refused. A failure changes nothing: the next renewal tries again, and a
// lock record that changed means a loss, which the renewals find.
func (ls *Lease) restamp(ctx context.Context) {
	ls.mu.Lock()
	due := time.Since(ls.stamped) >= restampEvery
	ls.mu.Unlock()
	if !due {
		return
	}
	if err := ls.l.st.Swap(ctx, ls.fence.Key, ls.fence.Value, ls.fence.Value); err == nil {
		ls.mu.Lock()
		ls.stamped = time.Now()
		ls.mu.Unlock()
	}
}

// readBack reads the lock and expiry records after a refused or unknown
// renewal. It reports lost (and cancels the lease) if the lock record is no
// longer the one this holder wrote, and records the expiry record it saw.
func (ls *Lease) readBack(ctx context.Context, sent time.Time, val []byte) (lost bool, err error) {
	cur, err := ls.l.get(ctx, ls.fence.Key)
	if err != nil {
		return false, err
	}
	if !bytes.Equal(cur, ls.fence.Value) {
		ls.lose("the lock record changed (taken over or force-released)")
		return true, nil
	}
	eb, err := ls.l.get(ctx, ls.n.expiryKey())
	if err != nil {
		return false, err
	}
	ls.setExp(eb, true)
	if bytes.Equal(eb, val) {
		ls.confirm(sent, val)
	}
	return false, nil
}

func (ls *Lease) confirmed(val []byte) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.expKnown && bytes.Equal(ls.exp, val)
}

func (ls *Lease) setExp(b []byte, known bool) {
	ls.mu.Lock()
	ls.exp, ls.expKnown = b, known
	ls.mu.Unlock()
}

// confirm moves the deadline to a lease after the renewal was sent.
func (ls *Lease) confirm(sent time.Time, val []byte) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.exp, ls.expKnown = val, true
	if d := sent.Add(ls.l.opts.Lease); d.After(ls.deadline) {
		ls.deadline = d
	}
}

// Release releases the lock with one conditional write (the lock record
// becomes free, keeping its token so that the next acquisition's is larger)
// and stops the heartbeat. It is idempotent: a second call returns the
// first's result, and a lock already lost is not an error (there is nothing
// left to release). The lease's context is cancelled with ErrReleased.
func (ls *Lease) Release(ctx context.Context) error {
	ls.releaseOnce.Do(func() { ls.releaseErr = ls.release(ctx) })
	return ls.releaseErr
}

func (ls *Lease) release(ctx context.Context) error {
	wasLost := ls.ctx.Err() != nil
	ls.cancel(ErrReleased) // stops a renewal in flight too
	close(ls.stop)
	<-ls.done
	ls.timer.Stop()
	if wasLost {
		ls.l.remember(ls.n, nil)
		return nil
	}
	free := encode(ls.l.freeRecord(ls.rec, false))
	b := newBackoff(ls.l.opts.Lease)
	deadline := time.Now().Add(max(ls.l.opts.Lease, time.Second))
	var err error
	for {
		err = ls.l.st.Swap(ctx, ls.fence.Key, ls.fence.Value, free)
		if err == nil {
			ls.l.remember(ls.n, free)
			return nil
		}
		if !errors.Is(err, metastore.ErrConflict) && !retryable(err) {
			break
		}
		// Read back: already free (an earlier attempt applied) or taken by
		// someone else (the lease had run out) both mean nothing is left
		// to release.
		cur, gerr := ls.l.get(ctx, ls.fence.Key)
		if gerr == nil && !bytes.Equal(cur, ls.fence.Value) {
			ls.l.remember(ls.n, cur)
			return nil
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			break
		}
		b.sleep(ctx, deadline)
	}
	ls.l.remember(ls.n, nil)
	return fmt.Errorf("lake: release %s: %w", ls.n, err)
}

// ResourceWriter is an optional ability of a Storage: a write to a
// resource of the store (not a lock record), applied only while the lock
// record holds exactly fence.Value, in one atomic write. The metastore
// adapter implements it with GuardedMutate.
type ResourceWriter interface {
	WriteFenced(ctx context.Context, fence Record, m metastore.Mutation) error
}

// Write applies m to the store only while this lease holds the lock,
// atomically with the check: the store refuses it once another holder took
// the lock over, however late the write arrives. It is refused at once with
// ErrLost once the lease is lost or released. A write refused by the fence
// matches both ErrLost and ErrConflict and cancels the lease; a conflict of
// m's own expectation matches ErrConflict alone.
func (ls *Lease) Write(ctx context.Context, m metastore.Mutation) error {
	rw, ok := ls.l.st.(ResourceWriter)
	if !ok {
		return fmt.Errorf("%w: this lock storage has no fenced resource writes", metastore.ErrInvalidArgument)
	}
	if err := ls.Err(); err != nil {
		return err
	}
	err := rw.WriteFenced(ctx, ls.fence, m)
	if errors.Is(err, metastore.ErrConflict) {
		cur, gerr := ls.l.get(ctx, ls.fence.Key)
		if gerr == nil && !bytes.Equal(cur, ls.fence.Value) {
			ls.lose("a fenced write found the lock record changed")
			return fmt.Errorf("%w: %w", ErrLost, lakeerr.Unprefixed(err))
		}
	}
	return err
}

// WithLock acquires name, runs fn with the lease's context (cancelled if the
// lock is lost) and releases the lock. If the lock was lost while fn ran,
// the error matches ErrLost even when fn returned nil.
func (l *Locker) WithLock(ctx context.Context, name string, fn func(ctx context.Context, ls *Lease) error) error {
	ls, err := l.Acquire(ctx, name)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(ls.Context(), func() { cancel(context.Cause(ls.Context())) })
	ferr := fn(fctx, ls)
	stop()
	cancel(nil)
	lostErr := ls.Err()
	rerr := ls.Release(context.WithoutCancel(ctx))
	if lostErr != nil && errors.Is(lostErr, ErrLost) {
		return errors.Join(ferr, lostErr)
	}
	return errors.Join(ferr, rerr)
}

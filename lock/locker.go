package lock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// Locker acquires locks on one Storage with one set of Options. It is safe
// for concurrent use; one Locker per process is the intended use, since it
// remembers the last lock record it saw of each name so that an uncontended
// re-acquisition is one conditional write.
type Locker struct {
	st   Storage
	opts Options
	host string
	pid  int

	// wallNow is the wall clock of records and expiry judgments: the
	// storage's Clock if it has one, else the host's.
	wallNow func() time.Time

	mu    sync.Mutex
	known map[string][]byte // name → lock record bytes last written or read
}

// New returns a Locker over st. opts may be nil (defaults); contradictions
// (a heartbeat longer than a third of the lease, negative durations) are
// refused with ErrInvalidArgument.
func New(st Storage, opts *Options) (*Locker, error) {
	if st == nil {
		return nil, fmt.Errorf("%w: nil lock storage", metastore.ErrInvalidArgument)
	}
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	l := &Locker{st: st, opts: o, host: hostname(), pid: os.Getpid(), known: map[string][]byte{}, wallNow: time.Now}
	if c, ok := st.(Clock); ok {
		l.wallNow = c.Now
	}
	return l, nil
}

// Options returns the resolved options.
func (l *Locker) Options() Options { return l.opts }

func (l *Locker) remember(n lockName, b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b == nil {
		delete(l.known, n.String())
		return
	}
	l.known[n.String()] = b
}

func (l *Locker) recall(n lockName) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.known[n.String()]
}

// observation is what a waiter without a clock-skew bound saw: the lock and
// expiry records, unchanged since the monotonic instant since.
type observation struct {
	lock, exp []byte
	since     time.Time
}

// Acquire takes the lock name ("NAMESPACE/NAME"), waiting up to the
// Locker's Wait with jittered backoff while another holder holds it, and
// taking over a holder whose lease has run out (see the package doc). The
// returned Lease heartbeats in the background until Release. A wait that
// runs out gives a *TimeoutError (ErrTimeout); ctx cancels the wait.
func (l *Locker) Acquire(ctx context.Context, name string) (*Lease, error) {
	n, err := parseName(name)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	deadline := start.Add(l.opts.Wait)
	backoff := newBackoff(l.opts.Lease)
	cur := l.recall(n) // nil: unknown, read it
	known := cur != nil
	var obs *observation
	var pending *attempt // a write whose outcome is unknown
	var last lockRecord
	var lastErr error // the last retryable error, if the lock was never seen held
	contended := 0    // times the lock was found held, or lost to another
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !known {
			cur, err = l.get(ctx, n.lockKey())
			if err != nil {
				lastErr = err
				if retryable(err) && time.Now().Before(deadline) {
					backoff.sleep(ctx, deadline)
					continue
				}
				return nil, err
			}
			known = true
		}
		if pending != nil {
			if cur != nil && bytes.Equal(cur, pending.value) {
				// The write whose outcome was unknown was applied.
				return l.hold(n, pending).withContended(contended), nil
			}
			pending = nil
		}
		var at *attempt
		var wait time.Duration // > 0: held and not yet expired
		damaged := false       // cur is not a lock record
		if cur == nil {
			at, err = l.create(ctx, n, nil)
		} else if rec, derr := decodeLock(n.lockKey(), cur); derr != nil {
			// A record that is not a lock record (damaged, or a foreign
			// writer's) proves no holder, as a missing one does: it is
			// replaced at a new generation, whose tokens pass every token
			// issued, conditional on its bytes, and the acquisition
			// counts as breaking a holder (TookOver), so that one that
			// may still run is fenced.
			damaged, last = true, lockRecord{}
			at, err = l.create(ctx, n, cur)
		} else {
			last = rec
			switch tok, ok := rec.Token.next(); {
			case !ok && rec.Held:
				// The sequence is exhausted: break the expired holder first
				// (a takeover to a free record), then take a new generation.
				if wait, err = l.expired(ctx, n, cur, rec, &obs); err == nil && wait == 0 {
					at, err = l.takeover(ctx, n, cur, rec, obs.exp, l.freeRecord(rec, true))
					if err == nil {
						known = false
						continue
					}
				}
			case !ok:
				at, err = l.create(ctx, n, cur)
			case !rec.Held:
				at = l.attempt(n, tok, nil)
				err = l.st.Swap(ctx, n.lockKey(), cur, at.value)
			default:
				if wait, err = l.expired(ctx, n, cur, rec, &obs); err == nil && wait == 0 {
					at, err = l.takeover(ctx, n, cur, rec, obs.exp, nil)
				}
			}
		}
		if at != nil {
			at.broke = cur == nil || damaged || last.Held || last.Forced
		}
		switch {
		case err == nil && at != nil:
			return l.hold(n, at).withContended(contended), nil
		case err == nil:
			// Held, not expired: wait below.
			contended++
		case errors.Is(err, metastore.ErrConflict):
			contended++
			// Someone else moved first: read again, at once, while the
			// wait lasts.
			known = false
			if l.opts.Wait != NoWait && time.Now().Before(deadline) {
				continue
			}
		case retryable(err):
			// Outcome unknown (or paused): read back before trying again.
			if at != nil && errors.Is(err, metastore.ErrUnavailable) {
				pending = at
			}
			known = false
			lastErr = err
		default:
			return nil, err
		}
		now := time.Now()
		if (l.opts.Wait == NoWait || !now.Before(deadline)) && pending == nil {
			if !last.Held && lastErr != nil {
				return nil, fmt.Errorf("lake: acquire %s: %w", n, lastErr)
			}
			return nil, l.timeout(ctx, n, last)
		}
		backoff.sleepAtMost(ctx, deadline, wait)
		known = false
	}
}

// attempt is one acquisition write: the bytes it writes and the instant it
// was sent, from which the holder counts its lease.
type attempt struct {
	value []byte
	rec   lockRecord
	sent  time.Time
	exp   []byte // the expiry record, when the acquisition knows it
	// broke: the acquisition replaced a holder that had not released
	// (a takeover), a forced release's free record, or a missing record;
	// a holder it replaced may still be running (see Lease.TookOver).
	broke bool
}

func (l *Locker) attempt(n lockName, tok Token, exp []byte) *attempt {
	now, stamp := time.Now(), l.wallNow()
	rec := lockRecord{
		Token: tok, Held: true, Holder: l.opts.Holder, Host: l.host, PID: l.pid,
		Acquired: wall(stamp), LeaseMS: l.opts.Lease.Milliseconds(), Expires: wall(stamp.Add(l.opts.Lease)),
	}
	return &attempt{value: encode(rec), rec: rec, sent: now, exp: exp}
}

// create makes a lock record with a new generation: the namespace's counter
// is bumped, then the record is written guarded on the bumped counter, so a
// creator that stalled between the two writes can never write a generation
// lower than a later creator's. old is the record to replace (nil: absent).
func (l *Locker) create(ctx context.Context, n lockName, old []byte) (*attempt, error) {
	gk := genKey(n.ns)
	gb, err := l.get(ctx, gk)
	if err != nil {
		return nil, err
	}
	var gen uint32
	if gb != nil {
		if gen, err = decodeGen(gk, gb); err != nil {
			return nil, err
		}
	}
	if gen == ^uint32(0) {
		return nil, fmt.Errorf("lake: lock namespace %s: generations exhausted", n.ns)
	}
	nb := []byte(fmt.Sprint(gen + 1))
	if gb == nil {
		err = l.st.Create(ctx, gk, nb)
	} else {
		err = l.st.Swap(ctx, gk, gb, nb)
	}
	if errors.Is(err, metastore.ErrUnavailable) {
		// Outcome unknown: if the counter holds what we wrote, it applied
		// (or another creator wrote the same number, and then the guarded
		// create below fails on the lock record instead).
		if cur, gerr := l.get(ctx, gk); gerr == nil && bytes.Equal(cur, nb) {
			err = nil
		}
	}
	if err != nil {
		return nil, err
	}
	at := l.attempt(n, makeToken(gen+1, 1), nil)
	return at, l.st.Fenced(ctx, Record{gk, nb}, Mutation{Key: n.lockKey(), Old: old, Value: at.value})
}

// expired decides whether the holder of rec may be taken over now. It
// returns 0 if so, else how long to wait at most before looking again.
func (l *Locker) expired(ctx context.Context, n lockName, cur []byte, rec lockRecord, obs **observation) (time.Duration, error) {
	if l.opts.ClockSkew > 0 {
		// The initial expiry only grows through renewals: while it has
		// not passed, the expiry record need not be read.
		if d := rec.Expires.Add(l.opts.ClockSkew).Sub(l.wallNow()); d > 0 {
			return d, nil
		}
		eb, err := l.get(ctx, n.expiryKey())
		if err != nil {
			return 0, err
		}
		exp := rec.Expires
		if eb != nil {
			e, err := decodeExpiry(n.expiryKey(), eb)
			if err != nil {
				return 0, err
			}
			if e.Token == rec.Token && e.Expires.After(exp) {
				exp = e.Expires
			}
		}
		*obs = &observation{lock: cur, exp: eb}
		if d := exp.Add(l.opts.ClockSkew).Sub(l.wallNow()); d > 0 {
			return d, nil
		}
		return 0, nil
	}
	// No clock bound: the lock and expiry records must stay unchanged for a
	// full lease of the holder's, on this process's monotonic clock.
	lease := time.Duration(rec.LeaseMS) * time.Millisecond
	o := *obs
	if o == nil || !bytes.Equal(o.lock, cur) {
		eb, err := l.get(ctx, n.expiryKey())
		if err != nil {
			return 0, err
		}
		*obs = &observation{lock: cur, exp: eb, since: time.Now()}
		return lease, nil
	}
	if d := lease - time.Since(o.since); d > 0 {
		return d, nil
	}
	// A renewal in between changed the expiry record: start over from it.
	eb, err := l.get(ctx, n.expiryKey())
	if err != nil {
		return 0, err
	}
	if !bytes.Equal(eb, o.exp) {
		*obs = &observation{lock: cur, exp: eb, since: time.Now()}
		return lease, nil
	}
	return 0, nil
}

// takeover replaces the expired holder's record, guarded on the expiry
// record as observed, so that a renewal that landed after the observation
// makes the takeover fail. An absent expiry record (a holder that never
// renewed) is first created with the holder's own initial expiry, which
// changes nothing a reader concludes, and then guarded on. With to set, the
// record becomes to instead of a new holder's (a takeover to free).
func (l *Locker) takeover(ctx context.Context, n lockName, cur []byte, rec lockRecord, eb []byte, to *lockRecord) (*attempt, error) {
	if eb == nil {
		eb = encode(expiryRecord{Token: rec.Token, Expires: rec.Expires})
		if err := l.st.Create(ctx, n.expiryKey(), eb); err != nil {
			return nil, err
		}
	}
	if to != nil {
		return nil, l.st.Fenced(ctx, Record{n.expiryKey(), eb}, Mutation{Key: n.lockKey(), Old: cur, Value: encode(*to)})
	}
	tok, _ := rec.Token.next()
	at := l.attempt(n, tok, eb)
	return at, l.st.Fenced(ctx, Record{n.expiryKey(), eb}, Mutation{Key: n.lockKey(), Old: cur, Value: at.value})
}

func (l *Locker) freeRecord(rec lockRecord, forced bool) *lockRecord {
	return &lockRecord{Token: rec.Token, Released: wall(l.wallNow()), Forced: forced}
}

// get reads key; a missing key is (nil, nil).
func (l *Locker) get(ctx context.Context, key string) ([]byte, error) {
	b, err := l.st.Get(ctx, key)
	if errors.Is(err, metastore.ErrNotFound) {
		return nil, nil
	}
	return b, err
}

func retryable(err error) bool {
	return errors.Is(err, metastore.ErrUnavailable) || errors.Is(err, metastore.ErrWritesPaused)
}

// timeout builds the error of a wait that ran out, from a fresh look at the
// lock when one is possible.
func (l *Locker) timeout(ctx context.Context, n lockName, last lockRecord) error {
	info, err := l.Inspect(ctx, n.String())
	if err != nil {
		info = infoOf(n, last, nil, l.wallNow())
	}
	return &TimeoutError{Name: n.String(), Wait: max(l.opts.Wait, 0), Holder: info}
}

// backoff is a jittered exponential backoff for waiters, capped at a tenth
// of the lease (at most 250 ms) so that a released lock is noticed soon.
type backoff struct {
	cur, cap time.Duration
}

func newBackoff(lease time.Duration) *backoff {
	c := min(lease/10, 250*time.Millisecond)
	return &backoff{cur: 2 * time.Millisecond, cap: max(c, 2*time.Millisecond)}
}

func (b *backoff) sleep(ctx context.Context, deadline time.Time) { b.sleepAtMost(ctx, deadline, 0) }

// sleepAtMost sleeps a jittered backoff, never past deadline and, when limit
// is positive, never longer than limit.
func (b *backoff) sleepAtMost(ctx context.Context, deadline time.Time, limit time.Duration) {
	d := b.cur/2 + rand.N(b.cur/2+1)
	b.cur = min(b.cur*2, b.cap)
	if limit > 0 && limit < d {
		d = limit + time.Millisecond
	}
	if r := time.Until(deadline); r < d {
		d = max(r, 0)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

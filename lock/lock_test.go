package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakemeta/lake/metastore"
)

func TestOptionsValidated(t *testing.T) {
	st := Metastore(newBolt(t))
	for _, tc := range []struct {
		name string
		o    Options
		ok   bool
	}{
		{"defaults", Options{}, true},
		{"heartbeat a third", Options{Lease: 3 * time.Second, Heartbeat: time.Second}, true},
		{"heartbeat over a third", Options{Lease: 3 * time.Second, Heartbeat: 1001 * time.Millisecond}, false},
		{"lease too short", Options{Lease: time.Millisecond}, false},
		{"negative wait", Options{Wait: -2}, false},
		{"no wait", Options{Wait: NoWait}, true},
		{"negative skew", Options{ClockSkew: -time.Second}, false},
		{"skew", Options{ClockSkew: time.Second}, true},
	} {
		_, err := New(st, &tc.o)
		if tc.ok != (err == nil) {
			t.Errorf("%s: err = %v", tc.name, err)
		}
		if err != nil && !errors.Is(err, metastore.ErrInvalidArgument) {
			t.Errorf("%s: %v is not ErrInvalidArgument", tc.name, err)
		}
	}
	l := newLocker(t, st, Options{})
	if o := l.Options(); o.Lease != DefaultLease || o.Heartbeat != DefaultLease/3 || o.Wait != DefaultWait {
		t.Fatalf("defaults: %+v", o)
	}
	for _, bad := range []string{"", "nons", "/x", "ns/", "ns//x", "n s/x", "ns/x/", "ns/../x"} {
		if _, err := l.Acquire(context.Background(), bad); !errors.Is(err, metastore.ErrInvalidArgument) {
			t.Errorf("Acquire(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// TestUncontendedRequests checks the request budget: a re-acquisition by
// the same Locker is one conditional write, a release one.
func TestUncontendedRequests(t *testing.T) {
	c := count(Metastore(newBolt(t)))
	l := newLocker(t, c, Options{Lease: time.Minute})
	ctx := context.Background()
	ls, err := l.Acquire(ctx, "ns/a")
	if err != nil {
		t.Fatal(err)
	}
	// First acquisition of a name: read it, read and bump the namespace's
	// generation, create the record guarded on it.
	if got := c.total(); got != 4 {
		t.Fatalf("first acquisition: %d requests %v", got, c.calls)
	}
	c.reset()
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.total(); got != 1 {
		t.Fatalf("release: %d requests %v", got, c.calls)
	}
	for i := range 20 {
		c.reset()
		ls, err = l.Acquire(ctx, "ns/a")
		if err != nil {
			t.Fatal(err)
		}
		if got := c.total(); got != 1 || c.calls["swap"] != 1 {
			t.Fatalf("re-acquisition %d: %d requests %v", i, got, c.calls)
		}
		c.reset()
		if err := ls.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if got := c.total(); got != 1 {
			t.Fatalf("release %d: %d requests %v", i, got, c.calls)
		}
		if err := ls.Release(ctx); err != nil { // idempotent, no request
			t.Fatal(err)
		}
	}
	// Another process (another Locker) reads the record once first.
	l2 := newLocker(t, c, Options{Lease: time.Minute})
	c.reset()
	ls, err = l2.Acquire(ctx, "ns/a")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.total(); got != 2 {
		t.Fatalf("cold acquisition: %d requests %v", got, c.calls)
	}
	ls.Release(ctx)
}

// TestMutualExclusion runs many goroutines, each with its own Locker (as
// separate processes would), acquiring one lock on every backend; an
// occupancy flag proves no two hold it at once, and a fenced counter
// proves every holder's write landed exactly once.
func TestMutualExclusion(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			const workers, each = 8, 25
			var inside atomic.Int32
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l := newLocker(t, Metastore(s), Options{Lease: 10 * time.Second, Wait: time.Minute, Holder: fmt.Sprint("w", w)})
					for range each {
						err := l.WithLock(context.Background(), "ns/counter", func(ctx context.Context, ls *Lease) error {
							if !inside.CompareAndSwap(0, 1) {
								return errors.New("two holders at once")
							}
							defer inside.Store(0)
							return fencedIncrement(ctx, s, ls, "count/x")
						})
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if v, err := s.Get(context.Background(), "count/x"); err != nil || string(v) != strconv.Itoa(workers*each) {
				t.Fatalf("counter = %q, %v; want %d", v, err, workers*each)
			}
		})
	}
}

// fencedIncrement reads key and writes it plus one through the lease.
func fencedIncrement(ctx context.Context, s *metastore.Store, ls *Lease, key string) error {
	v, err := s.Get(ctx, key)
	exp := metastore.ExpectValue(v)
	n := 0
	switch {
	case errors.Is(err, metastore.ErrNotFound):
		exp = metastore.ExpectAbsent()
	case err != nil:
		return err
	default:
		n, _ = strconv.Atoi(string(v))
	}
	return ls.Write(ctx, metastore.Mutation{Key: key, Expect: exp, Value: []byte(strconv.Itoa(n + 1))})
}

// TestTokensOnlyGrow acquires one name through every way a lock changes
// hands, including its records deleted underneath it (a TTL clean-up),
// and requires every token to exceed every earlier one.
func TestTokensOnlyGrow(t *testing.T) {
	s := newBolt(t)
	ctx := context.Background()
	opts := Options{Lease: 200 * time.Millisecond, Wait: 5 * time.Second, ClockSkew: 10 * time.Millisecond}
	l := newLocker(t, Metastore(s), opts)
	var last Token
	take := func(how string) *Lease {
		t.Helper()
		ls, err := newLocker(t, Metastore(s), opts).Acquire(ctx, "ns/t")
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		if ls.Token() <= last {
			t.Fatalf("%s: token %d after %d", how, ls.Token(), last)
		}
		last = ls.Token()
		return ls
	}
	deleteKey := func(key string) {
		t.Helper()
		v, err := s.Get(ctx, key)
		if errors.Is(err, metastore.ErrNotFound) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, key, v); err != nil {
			t.Fatal(err)
		}
	}
	ls := take("first")
	ls.Release(ctx)
	ls = take("after release")
	ls.crash()
	ls = take("takeover of a crashed holder")
	if err := l.ForceRelease(ctx, "ns/t", ls.Token()); err != nil {
		t.Fatal(err)
	}
	ls.crash()
	ls = take("after a forced release")
	ls.Release(ctx)
	deleteKey(KeyPrefix + "rec/ns/t")
	ls = take("after the lock record was deleted")
	time.Sleep(100 * time.Millisecond) // a renewal writes the expiry record
	ls.crash()
	deleteKey(KeyPrefix + "rec/ns/t")
	deleteKey(KeyPrefix + "exp/ns/t")
	ls = take("after both records were deleted")
	ls.crash()
	deleteKey(KeyPrefix + "exp/ns/t")
	ls = take("takeover with the expiry record deleted")
	ls.Release(ctx)
	if last.Generation() != 3 {
		t.Fatalf("generation %d, want 3 (created three times)", last.Generation())
	}
}

// TestRenewalNeverFailsOwnWrites keeps fenced writes in flight while the
// lease renews every few milliseconds: none may be refused.
func TestRenewalNeverFailsOwnWrites(t *testing.T) {
	s := newBolt(t)
	c := count(Metastore(s))
	l := newLocker(t, c, Options{Lease: 600 * time.Millisecond, Heartbeat: 10 * time.Millisecond})
	ctx := context.Background()
	ls, err := l.Acquire(ctx, "ns/r")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				if err := ls.Write(ctx, metastore.Mutation{Key: fmt.Sprintf("r/%d", w), Expect: expectAfter(i, w), Value: []byte(strconv.Itoa(i))}); err != nil {
					t.Errorf("write %d/%d: %v", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	c.mu.Lock()
	renewals := c.calls["fenced"]
	c.mu.Unlock()
	if renewals < 3 {
		t.Fatalf("only %d renewals happened during the writes", renewals)
	}
	if err := ls.Err(); err != nil {
		t.Fatal(err)
	}
	ls.Release(ctx)
}

func expectAfter(i, _ int) metastore.Expect {
	if i == 0 {
		return metastore.ExpectAbsent()
	}
	return metastore.ExpectValue([]byte(strconv.Itoa(i - 1)))
}

// TestRenewalRetriedUntilLeaseRunsOut pauses writes (as a finalization
// does) and loses renewal responses: shorter than the lease, the lock is
// kept; longer, it is lost at the end of the lease, the holder's context is
// cancelled at once and its fenced writes are refused.
func TestRenewalRetriedUntilLeaseRunsOut(t *testing.T) {
	s := newBolt(t)
	c := count(Metastore(s))
	const lease = 300 * time.Millisecond
	l := newLocker(t, c, Options{Lease: lease, Heartbeat: lease / 6})
	ctx := context.Background()
	ls, err := l.Acquire(ctx, "ns/p")
	if err != nil {
		t.Fatal(err)
	}
	var mode atomic.Int32 // 0 ok, 1 paused, 2 responses lost
	c.mu.Lock()
	c.fail = func(op, key string) error {
		if op == "fenced" && mode.Load() == 1 {
			return fmt.Errorf("%w (test)", metastore.ErrWritesPaused)
		}
		return nil
	}
	c.lose = func(op, key string) bool { return op == "fenced" && mode.Load() == 2 }
	c.mu.Unlock()

	mode.Store(1)
	time.Sleep(lease / 2)
	mode.Store(2)
	time.Sleep(lease / 2)
	mode.Store(0)
	time.Sleep(lease / 2)
	if err := ls.Err(); err != nil {
		t.Fatalf("lost during a pause shorter than the lease: %v", err)
	}
	mode.Store(1)
	start := time.Now()
	select {
	case <-ls.Context().Done():
	case <-time.After(5 * lease):
		t.Fatal("never told of the loss")
	}
	if d := time.Since(start); d > lease+lease/2 {
		t.Fatalf("told of the loss %v after writes paused, lease %v", d, lease)
	}
	if !errors.Is(context.Cause(ls.Context()), ErrLost) {
		t.Fatalf("cause %v", context.Cause(ls.Context()))
	}
	if err := ls.Write(ctx, metastore.Mutation{Key: "x", Value: []byte("1")}); !errors.Is(err, ErrLost) {
		t.Fatalf("write after loss: %v", err)
	}
	mode.Store(0)
	if err := ls.Release(ctx); err != nil {
		t.Fatalf("release of a lost lock: %v", err)
	}
}

// TestTakeover checks both takeover rules against a crashed holder: with a
// clock-skew bound, not before expiry plus the bound; without one, not
// before a full lease of unchanged observation.
func TestTakeover(t *testing.T) {
	const lease = 400 * time.Millisecond
	for _, skew := range []time.Duration{50 * time.Millisecond, 0} {
		t.Run(fmt.Sprint("skew=", skew), func(t *testing.T) {
			s := newBolt(t)
			ctx := context.Background()
			opts := Options{Lease: lease, Wait: 5 * time.Second, ClockSkew: skew}
			holder, err := newLocker(t, Metastore(s), opts).Acquire(ctx, "ns/k")
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(lease / 2) // at least one renewal
			holder.crash()
			crashed := time.Now()
			info, err := newLocker(t, Metastore(s), opts).Inspect(ctx, "ns/k")
			if err != nil {
				t.Fatal(err)
			}
			ls, err := newLocker(t, Metastore(s), opts).Acquire(ctx, "ns/k")
			if err != nil {
				t.Fatal(err)
			}
			took := time.Now()
			if skew > 0 && took.Before(info.Expires.Add(skew)) {
				t.Fatalf("took over at %v, before expiry %v + skew", took, info.Expires)
			}
			if skew == 0 && took.Sub(crashed) < lease {
				t.Fatalf("took over %v after first observing, lease %v", took.Sub(crashed), lease)
			}
			if ls.Token() <= holder.Token() {
				t.Fatal("token did not grow")
			}
			// The crashed holder's fenced write is refused by the store.
			if err := holder.Write(ctx, metastore.Mutation{Key: "x", Value: []byte("stale")}); !errors.Is(err, ErrLost) {
				t.Fatalf("stale write: %v", err)
			}
			ls.Release(ctx)
		})
	}
}

// TestForceRelease breaks a live holder by naming its token.
func TestForceRelease(t *testing.T) {
	s := newBolt(t)
	ctx := context.Background()
	l := newLocker(t, Metastore(s), Options{Lease: 300 * time.Millisecond})
	ls, err := l.Acquire(ctx, "ns/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ForceRelease(ctx, "ns/f", ls.Token()+1); !errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("wrong token: %v", err)
	}
	if err := l.ForceRelease(ctx, "ns/f", ls.Token()); err != nil {
		t.Fatal(err)
	}
	if err := l.ForceRelease(ctx, "ns/f", ls.Token()); !errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("second forced release: %v", err)
	}
	select {
	case <-ls.Context().Done():
	case <-time.After(2 * time.Second):
		t.Fatal("holder never learned of the forced release")
	}
	if err := ls.Write(ctx, metastore.Mutation{Key: "x", Value: []byte("1")}); !errors.Is(err, ErrLost) {
		t.Fatalf("write after forced release: %v", err)
	}
	info, err := l.Inspect(ctx, "ns/f")
	if err != nil || info.Held || !info.Forced || info.Token != ls.Token() {
		t.Fatalf("inspect: %+v %v", info, err)
	}
}

// TestNamespaces: two namespaces never contend, and List sees each alone.
func TestNamespaces(t *testing.T) {
	s := newBolt(t)
	ctx := context.Background()
	opts := Options{Lease: time.Minute, Wait: NoWait}
	a, err := newLocker(t, Metastore(s), opts).Acquire(ctx, "team-a/sync")
	if err != nil {
		t.Fatal(err)
	}
	b, err := newLocker(t, Metastore(s), opts).Acquire(ctx, "team-b/sync")
	if err != nil {
		t.Fatalf("another namespace contended: %v", err)
	}
	_, err = newLocker(t, Metastore(s), opts).Acquire(ctx, "team-a/sync")
	var te *TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, ErrTimeout) || te.Holder.Holder != a.l.opts.Holder || te.Holder.Acquired.IsZero() {
		t.Fatalf("held lock: %v", err)
	}
	l := newLocker(t, Metastore(s), opts)
	for ns, want := range map[string]string{"team-a": "team-a/sync", "team-b": "team-b/sync"} {
		infos, err := l.List(ctx, ns)
		if err != nil || len(infos) != 1 || infos[0].Name != want || !infos[0].Held {
			t.Fatalf("List(%s) = %+v, %v", ns, infos, err)
		}
	}
	if infos, err := l.List(ctx, "team"); err != nil || len(infos) != 0 {
		t.Fatalf("List(team) = %+v, %v", infos, err)
	}
	a.Release(ctx)
	b.Release(ctx)
}

// TestUnknownOutcomes loses the response of every acquisition and release
// write: the Locker reads back and recognises its own writes.
func TestUnknownOutcomes(t *testing.T) {
	c := count(Metastore(newBolt(t)))
	c.lose = func(op, key string) bool { return op != "fenced" }
	l := newLocker(t, c, Options{Lease: time.Minute, Wait: 2 * time.Second})
	ctx := context.Background()
	var last Token
	for range 5 {
		ls, err := l.Acquire(ctx, "ns/u")
		if err != nil {
			t.Fatal(err)
		}
		if ls.Token() <= last {
			t.Fatalf("token %d after %d", ls.Token(), last)
		}
		last = ls.Token()
		if err := ls.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Package locktest is the conformance suite of lock.Storage: one call runs
// every behaviour the lock algorithm relies on against a storage, and then
// the algorithm itself (contending Lockers, fenced writes) on it. A store
// that implements lock.Storage (the metastore adapter; the datastore
// drivers) runs it in its own tests:
//
//	func TestLockStorage(t *testing.T) {
//		locktest.RunStorageTests(t, func(t *testing.T) lock.Storage { return newStorage(t) })
//	}
//
// Each behaviour is a subtest on a fresh storage from the harness.
package locktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/metastore"
)

// Harness returns a fresh, empty storage for one subtest.
type Harness func(t *testing.T) lock.Storage

// RunStorageTests runs the suite against the storages newStorage returns.
func RunStorageTests(t *testing.T, newStorage Harness) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, lock.Storage)
	}{
		{"GetMissing", testGetMissing},
		{"Create", testCreate},
		{"Swap", testSwap},
		{"List", testList},
		{"Fenced", testFenced},
		{"ConcurrentCreate", testConcurrentCreate},
		{"ConcurrentFenced", testConcurrentFenced},
		{"Locks", testLocks},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStorage(t)) })
	}
}

func want(t *testing.T, st lock.Storage, key, value string) {
	t.Helper()
	got, err := st.Get(t.Context(), key)
	if err != nil || string(got) != value {
		t.Fatalf("Get(%s) = %q, %v; want %q", key, got, err, value)
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: %v, want %v", what, err, target)
	}
}

func testGetMissing(t *testing.T, st lock.Storage) {
	_, err := st.Get(t.Context(), "rec/ns/missing")
	wantErr(t, "Get of a missing record", err, metastore.ErrNotFound)
}

func testCreate(t *testing.T, st lock.Storage) {
	ctx := t.Context()
	if err := st.Create(ctx, "rec/ns/a", []byte("one")); err != nil {
		t.Fatal(err)
	}
	want(t, st, "rec/ns/a", "one")
	wantErr(t, "second Create", st.Create(ctx, "rec/ns/a", []byte("two")), metastore.ErrConflict)
	want(t, st, "rec/ns/a", "one")
}

func testSwap(t *testing.T, st lock.Storage) {
	ctx := t.Context()
	wantErr(t, "Swap of a missing record", st.Swap(ctx, "rec/ns/s", []byte("x"), []byte("y")), metastore.ErrConflict)
	if _, err := st.Get(ctx, "rec/ns/s"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("a failed Swap created the record: %v", err)
	}
	if err := st.Create(ctx, "rec/ns/s", []byte("1")); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "Swap from a wrong value", st.Swap(ctx, "rec/ns/s", []byte("2"), []byte("3")), metastore.ErrConflict)
	want(t, st, "rec/ns/s", "1")
	if err := st.Swap(ctx, "rec/ns/s", []byte("1"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	want(t, st, "rec/ns/s", "2")
}

func testList(t *testing.T, st lock.Storage) {
	ctx := t.Context()
	for _, k := range []string{"rec/a/y", "rec/a/x", "rec/a/x/deep", "rec/ab/z", "exp/a/x", "gen/a"} {
		if err := st.Create(ctx, k, []byte("v:"+k)); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := st.List(ctx, "rec/a/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range recs {
		keys = append(keys, r.Key)
		if string(r.Value) != "v:"+r.Key {
			t.Fatalf("List value of %s = %q", r.Key, r.Value)
		}
	}
	if fmt.Sprint(keys) != "[rec/a/x rec/a/x/deep rec/a/y]" {
		t.Fatalf("List(rec/a/) = %v", keys)
	}
	if recs, err := st.List(ctx, "rec/none/"); err != nil || len(recs) != 0 {
		t.Fatalf("List of an empty prefix = %v, %v", recs, err)
	}
}

func testFenced(t *testing.T, st lock.Storage) {
	ctx := t.Context()
	fence := lock.Record{Key: "rec/ns/f", Value: []byte("held by 1")}
	wantErr(t, "Fenced on a missing fence", st.Fenced(ctx, fence, lock.Mutation{Key: "exp/ns/f", Value: []byte("a")}), metastore.ErrConflict)
	if err := st.Create(ctx, fence.Key, fence.Value); err != nil {
		t.Fatal(err)
	}
	if err := st.Fenced(ctx, fence, lock.Mutation{Key: "exp/ns/f", Value: []byte("a")}); err != nil {
		t.Fatalf("Fenced create: %v", err)
	}
	want(t, st, "exp/ns/f", "a")
	wantErr(t, "Fenced create of an existing target", st.Fenced(ctx, fence, lock.Mutation{Key: "exp/ns/f", Value: []byte("b")}), metastore.ErrConflict)
	wantErr(t, "Fenced from a wrong value", st.Fenced(ctx, fence, lock.Mutation{Key: "exp/ns/f", Old: []byte("z"), Value: []byte("b")}), metastore.ErrConflict)
	if err := st.Fenced(ctx, fence, lock.Mutation{Key: "exp/ns/f", Old: []byte("a"), Value: []byte("b")}); err != nil {
		t.Fatalf("Fenced swap: %v", err)
	}
	want(t, st, "exp/ns/f", "b")
	if err := st.Swap(ctx, fence.Key, fence.Value, []byte("held by 2")); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "Fenced on a changed fence", st.Fenced(ctx, fence, lock.Mutation{Key: "exp/ns/f", Old: []byte("b"), Value: []byte("c")}), metastore.ErrConflict)
	want(t, st, "exp/ns/f", "b")
}

// testConcurrentCreate: of many creates of one record exactly one wins.
func testConcurrentCreate(t *testing.T, st lock.Storage) {
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := st.Create(context.Background(), "gen/race", []byte(strconv.Itoa(i)))
			if err == nil {
				wins.Add(1)
			} else if !errors.Is(err, metastore.ErrConflict) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d creates of one record won, want 1", wins.Load())
	}
}

// testConcurrentFenced: writers fenced on a record race a writer that
// changes it; once the change is acknowledged, no fenced write is applied.
func testConcurrentFenced(t *testing.T, st lock.Storage) {
	ctx := t.Context()
	fence := lock.Record{Key: "rec/ns/c", Value: []byte("old")}
	if err := st.Create(ctx, fence.Key, fence.Value); err != nil {
		t.Fatal(err)
	}
	if err := st.Create(ctx, "exp/ns/c", []byte("0")); err != nil {
		t.Fatal(err)
	}
	var changed atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				after := changed.Load()
				cur, err := st.Get(ctx, "exp/ns/c")
				if err != nil {
					errs <- err
					return
				}
				n, _ := strconv.Atoi(string(cur))
				err = st.Fenced(ctx, fence, lock.Mutation{Key: "exp/ns/c", Old: cur, Value: []byte(strconv.Itoa(n + 1))})
				if err == nil && after {
					errs <- errors.New("a fenced write started after the fence changed was applied")
					return
				}
				if err != nil && !errors.Is(err, metastore.ErrConflict) {
					errs <- err
					return
				}
			}
		}()
	}
	time.Sleep(5 * time.Millisecond)
	if err := st.Swap(ctx, fence.Key, fence.Value, []byte("new")); err != nil {
		t.Fatal(err)
	}
	changed.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// testLocks runs the algorithm on the storage: Lockers in goroutines take
// one lock in turns and increment a counter with writes fenced on it; the
// counter ends at the number of acquisitions and every token exceeds the
// one before it.
func testLocks(t *testing.T, st lock.Storage) {
	const workers, each = 6, 15
	var inside atomic.Int32
	var mu sync.Mutex
	var tokens []lock.Token
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := lock.New(st, &lock.Options{Lease: 10 * time.Second, Wait: time.Minute, Holder: fmt.Sprint("w", w)})
			if err != nil {
				errs <- err
				return
			}
			for range each {
				err := l.WithLock(context.Background(), "suite/counter", func(ctx context.Context, ls *lock.Lease) error {
					if !inside.CompareAndSwap(0, 1) {
						return errors.New("two holders at once")
					}
					defer inside.Store(0)
					mu.Lock()
					tokens = append(tokens, ls.Token())
					mu.Unlock()
					cur, err := st.Get(ctx, "exp/suite-data/count")
					var old []byte
					n := 0
					switch {
					case errors.Is(err, metastore.ErrNotFound):
					case err != nil:
						return err
					default:
						old = cur
						n, _ = strconv.Atoi(string(cur))
					}
					return st.Fenced(ctx, ls.Fence(), lock.Mutation{Key: "exp/suite-data/count", Old: old, Value: []byte(strconv.Itoa(n + 1))})
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
	want(t, st, "exp/suite-data/count", strconv.Itoa(workers*each))
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d after %d", tokens[i], tokens[i-1])
		}
	}
	if !bytes.Equal([]byte(tokens[0].String()), []byte(strconv.FormatUint(uint64(tokens[0]), 10))) {
		t.Fatal("token renders as something other than its decimal value")
	}
}

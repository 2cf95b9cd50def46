package s3fs_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dslock"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/childtest"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/lock"
)

func openURL(ctx context.Context, bucket, prefix string) (*s3fs.Driver, error) {
	return s3fs.Open(ctx, s3fs.NewClient(s3local.EnvConfig(os.Getenv(s3local.EnvEndpoint))), s3fs.Options{Bucket: bucket, Prefix: prefix})
}

// freshStore is a store over d that reads and writes as a new datastore
// does (its driver's FreshLayout: models-v5, a commit visible by its head),
// so that the workloads check the protocol new datastores use.
func freshStore(d *s3fs.Driver) *datastore.Store {
	s := datastore.New(d)
	s.SetLayout(d.FreshLayout())
	return s
}

// TestFencingWorkload is the checked workload on S3: holders in separate
// processes increment the register through the lock while the parent
// pauses the holder (SIGSTOP) past its lease and resumes it. The checker
// reads the history as readers see it (the register's log) and finds no
// stale write visible after a newer holder's and no lost update; the paused
// holders' writes are refused by the store. The same workload without the
// fence (the negative control) must be caught.
func TestFencingWorkload(t *testing.T) {
	for _, fenced := range []bool{true, false} {
		t.Run(map[bool]string{true: "fenced", false: "unfenced"}[fenced], func(t *testing.T) {
			// A round that proves nothing (too few pauses, no paused holder
			// back under its old token, unfenced writers that were lucky)
			// is a matter of timing on a loaded machine, not of safety: it
			// runs again, up to three times. A violation under the fence
			// fails at once.
			for round := 1; ; round++ {
				r := fencingRound(t, fenced)
				t.Logf("round %d: %d pauses; outcomes %v; %d writes visible; %d violations", round, r.pauses, r.outcomes, len(r.writes), len(r.violations))
				if fenced && len(r.violations) > 0 {
					t.Fatalf("fenced: %d violations, first: %s", len(r.violations), r.violations[0])
				}
				if fenced && r.pauses >= 3 && len(r.writes) >= 10 {
					if n, err := readRegister(t.Context(), r.store); err != nil || n != len(r.writes) {
						t.Fatalf("register = %d, %v; want %d, one per visible write", n, err, len(r.writes))
					}
				}
				var unproved string
				switch {
				case r.pauses < 3 || len(r.writes) < 10:
					unproved = fmt.Sprintf("workload too small to prove anything: %d pauses, %d writes", r.pauses, len(r.writes))
				case fenced && r.outcomes["refused"] == 0:
					unproved = "no paused holder came back to write under its old token: the workload proved nothing"
				case !fenced && len(r.violations) == 0:
					unproved = "negative control: the checker did not catch the unfenced writes"
				}
				if unproved == "" {
					return
				}
				if round == 3 {
					t.Fatal(unproved)
				}
			}
		})
	}
}

// fencingResult is what one round of TestFencingWorkload saw.
type fencingResult struct {
	pauses     int
	outcomes   map[string]int
	writes     []regMeta
	violations []string
	store      *datastore.Store
}

// fencingRound runs one round of TestFencingWorkload on a fresh bucket:
// three holders in separate processes, the holder paused past its lease
// over and over.
func fencingRound(t *testing.T, fenced bool) fencingResult {
	bucket := s3local.Bucket(t)
	d, err := openURL(t.Context(), bucket, "fence")
	if err != nil {
		t.Fatal(err)
	}
	const lease, dur = 600 * time.Millisecond, 10 * time.Second
	var cs []*childtest.Child
	for i := range 3 {
		cs = append(cs, childtest.Start(t, childEnv, childConfig{Bucket: bucket, Prefix: "fence", ID: fmt.Sprint("p", i), Fenced: fenced, Duration: dur, Lease: lease}))
	}
	r := fencingResult{outcomes: map[string]int{}}
	for end := time.Now().Add(dur - 2*lease); time.Now().Before(end); {
		time.Sleep(time.Duration(100+rand.N(200)) * time.Millisecond)
		i := holderIndex(t.Context(), d)
		if i < 0 || i >= len(cs) {
			continue
		}
		if cs[i].Pause() != nil {
			continue
		}
		r.pauses++
		time.Sleep(4 * lease)
		cs[i].Resume()
	}
	for i, c := range cs {
		select {
		case <-c.Done():
		case <-time.After(2 * time.Minute):
			t.Fatalf("holder %d did not finish: %s", i, c.Err.String())
		}
		if code := c.Cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("holder %d exited %d: %s", i, code, c.Err.String())
		}
		sc := bufio.NewScanner(&c.Out)
		for sc.Scan() {
			r.outcomes[sc.Text()]++
		}
	}
	r.store = freshStore(d)
	r.writes = visibleWrites(t, r.store)
	r.violations = checkHistory(r.writes)
	return r
}

// TestTenWorkers: ten concurrent workers each increment the register a few
// times through the datastore with the lock (lock, fence, pull, put, fenced
// commit, release) while readers read it without the lock: no update is
// lost, and no reader ever sees a partial or mixed file. It is the Go API
// level of `lake data run` with ten workers.
func TestTenWorkers(t *testing.T) {
	d := newDriver(t)
	s := freshStore(d)
	const workers, each = 10, 2
	var wg sync.WaitGroup
	errs := make(chan error, workers+2)
	var done atomic.Bool
	var reads atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				if _, err := readRegister(t.Context(), s); err != nil {
					errs <- fmt.Errorf("reader: %w", err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	var workersWG sync.WaitGroup
	for w := range workers {
		workersWG.Add(1)
		go func() {
			defer workersWG.Done()
			l, err := lock.New(dslock.New(datastore.New(d)), &lock.Options{Lease: 10 * time.Second, Wait: 5 * time.Minute, Holder: fmt.Sprint("w", w)})
			if err != nil {
				errs <- err
				return
			}
			for range each {
				err := l.WithLock(t.Context(), "ns/register", func(ctx context.Context, ls *lock.Lease) error {
					_, err := increment(ctx, s, d, ls, true, nil)
					return err
				})
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
			}
		}()
	}
	workersWG.Wait()
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n, err := readRegister(t.Context(), s)
	if err != nil || n != workers*each {
		t.Fatalf("register = %d, %v; want %d: updates were lost", n, err, workers*each)
	}
	if v := checkHistory(visibleWrites(t, s)); len(v) > 0 {
		t.Fatalf("history: %s", strings.Join(v, "; "))
	}
	if reads.Load() == 0 {
		t.Fatal("the readers never read")
	}
	t.Logf("%d increments by %d workers, %d whole reads alongside", n, workers, reads.Load())
}

var _ = errors.Is

package dstest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// Pauser holds one request of a holder's commit until released: a driver
// hook, a wire proxy or a fault proxy calls Before with the name of each
// request it is about to send, and the request armed by Arm (counted from
// arming) waits there, before the backend sees it.
type Pauser struct {
	mu      sync.Mutex
	armed   bool
	n, k    int
	ops     []string
	paused  chan struct{}
	release chan struct{}
}

// Arm makes request k (0 is the next one) wait for the release.
func (p *Pauser) Arm(k int) (paused <-chan struct{}, release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.n, p.k, p.ops = true, 0, k, nil
	p.paused, p.release = make(chan struct{}), make(chan struct{})
	return p.paused, sync.OnceFunc(func() { close(p.release) })
}

// Disarm lets every request through unpaused and uncounted.
func (p *Pauser) Disarm() {
	p.mu.Lock()
	p.armed = false
	p.mu.Unlock()
}

// Before is called with each request's name before it is sent; it blocks
// while the armed request is paused.
func (p *Pauser) Before(op string) {
	p.mu.Lock()
	if !p.armed {
		p.mu.Unlock()
		return
	}
	n := p.n
	p.n++
	p.ops = append(p.ops, op)
	paused, release, k := p.paused, p.release, p.k
	p.mu.Unlock()
	if n == k {
		close(paused)
		<-release
	}
}

// ops returns the requests seen since arming.
func (p *Pauser) seen() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.ops, " ")
}

// RunPausedTakeover (issue 28, item 1): holder A commits data/m/K/a fenced
// on its lock record through sA, whose every request goes through p, and is
// paused before each request of its commit in turn; B (sB, the same
// datastore, unpaused) takes the lock over, reads the path and commits a
// write based on what it read; then A resumes. In every interleaving A's
// commit is either refused (a conflict) and invisible to every reader, or it
// stood and B read it: never a stale commit after a newer one, never a lost
// update. It fails if no interleaving refused A, which would mean the pause
// never fell before A's commit point.
func RunPausedTakeover(t *testing.T, sA, sB *datastore.Store, p *Pauser) {
	reachedAll, refused := false, 0
	for k := 0; k < 40 && !reachedAll; k++ {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		key := fmt.Sprintf("rec/default/sync%d", k)
		path := fmt.Sprintf("data/m/%d/a", k)
		tokA, tokB := fmt.Appendf(nil, `{"token":%d}`, 2*k+1), fmt.Appendf(nil, `{"token":%d}`, 2*k+2)
		fenceA, fenceB := &datastore.Fence{Key: key, Token: tokA}, &datastore.Fence{Key: key, Token: tokB}
		if err := sB.Records().CASRecord(ctx, key, metastore.ExpectAbsent(), tokA); err != nil {
			t.Fatal(err)
		}
		commit := func(s *datastore.Store, f *datastore.Fence, body string) (datastore.Staged, error) {
			st, err := s.Upload(ctx, path, strings.NewReader(body), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Commit(ctx, f, []datastore.Entry{{Put: &st}})
			return st, err
		}
		if _, err := commit(sB, fenceA, "0"); err != nil {
			t.Fatal(err)
		}
		stA, err := sA.Upload(ctx, path, strings.NewReader("A"), nil)
		if err != nil {
			t.Fatal(err)
		}
		paused, release := p.Arm(k)
		done := make(chan error, 1)
		go func() {
			_, err := sA.Commit(ctx, fenceA, []datastore.Entry{{Put: &stA}})
			done <- err
		}()
		var aErr error
		select {
		case <-paused:
		case aErr = <-done:
			// A's commit sent k requests or fewer: every one of them
			// has been paused at.
			p.Disarm()
			reachedAll = true
			if aErr != nil {
				t.Fatalf("A's unpaused commit: %v", aErr)
			}
			cancel()
			continue
		}
		// B takes over while A is paused, reads, and writes on what it read.
		if err := sB.Records().CASRecord(ctx, key, metastore.ExpectValue(tokA), tokB); err != nil {
			t.Fatal(err)
		}
		seen, err := sB.Stat(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		stB, err := commit(sB, fenceB, "B saw "+seen.Version)
		if err != nil {
			t.Fatalf("k=%d: B's commit: %v", k, err)
		}
		release()
		aErr = <-done
		p.Disarm()

		cur, err := sB.Stat(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		ch, _, err := sB.Changes(ctx, datastore.Partition(path), 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		aInFeed := false
		for _, c := range ch {
			aInFeed = aInFeed || c.Version == stA.Version
		}
		ops := p.seen()
		switch {
		case aErr != nil && !errors.Is(aErr, metastore.ErrConflict):
			t.Errorf("k=%d (%s): A's commit failed with %v, want a conflict or success", k, ops, aErr)
		case aErr != nil && (cur.Version == stA.Version || aInFeed):
			t.Errorf("k=%d (%s): A's refused commit is visible", k, ops)
		case aErr == nil && seen.Version != stA.Version:
			t.Errorf("k=%d (%s): A's commit stood but landed after B's takeover (B read %s)", k, ops, seen.Version)
		case cur.Version != stB.Version:
			t.Errorf("k=%d (%s): the path holds %s after B's commit, want B's %s", k, ops, cur.Version, stB.Version)
		}
		if aErr != nil {
			refused++
		}
		t.Logf("paused before request %d of [%s]: A's commit %v", k, ops, aErr)
		cancel()
	}
	if !reachedAll {
		t.Fatal("A's commit never finished unpaused within 40 requests")
	}
	if refused == 0 {
		t.Fatal("no interleaving refused A's commit: the pause never fell before its commit point")
	}
}

// PausingDriver wraps d so that every call a commit makes (its reads, its
// records, the commit itself) passes p.Before first: the pause of a backend
// without requests to hold, such as a bolt file.
func PausingDriver(d datastore.Driver, p *Pauser) datastore.Driver { return pausing{d, p} }

type pausing struct {
	datastore.Driver
	p *Pauser
}

func (d pausing) Commit(ctx context.Context, fence *datastore.Fence, entries []datastore.Entry, now time.Time) ([]datastore.Info, error) {
	d.p.Before("Commit")
	return d.Driver.Commit(ctx, fence, entries, now)
}

func (d pausing) Stat(ctx context.Context, paths []string) (map[string]datastore.Info, error) {
	d.p.Before("Stat")
	return d.Driver.Stat(ctx, paths)
}

func (d pausing) GetRecord(ctx context.Context, key string) ([]byte, error) {
	d.p.Before("GetRecord")
	return d.Driver.GetRecord(ctx, key)
}

func (d pausing) CASRecord(ctx context.Context, key string, expect metastore.Expect, value []byte) error {
	d.p.Before("CASRecord")
	return d.Driver.CASRecord(ctx, key, expect, value)
}

func (d pausing) Head(ctx context.Context, partition string) (datastore.Head, error) {
	d.p.Before("Head")
	return d.Driver.Head(ctx, partition)
}

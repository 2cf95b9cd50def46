package dynamofs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/lakemeta/lake/internal/faultproxy"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
)

// pauser is a faultproxy decider that holds the armed request number k
// (counted from arming) until released: a holder paused at that request,
// before DynamoDB sees it.
type pauser struct {
	mu      sync.Mutex
	armed   bool
	n, k    int
	ops     []string
	paused  chan struct{}
	release chan struct{}
}

func (p *pauser) arm(k int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.n, p.k, p.ops = true, 0, k, nil
	p.paused, p.release = make(chan struct{}), make(chan struct{})
}

func (p *pauser) decide(op string) faultproxy.Fault {
	p.mu.Lock()
	if !p.armed {
		p.mu.Unlock()
		return faultproxy.None
	}
	n := p.n
	p.n++
	p.ops = append(p.ops, op)
	paused, release := p.paused, p.release
	p.mu.Unlock()
	if n == p.k {
		close(paused)
		<-release
	}
	return faultproxy.None
}

// TestPausedHolderAtEveryRequest (issue 28, item 1, on DynamoDB): holder A
// commits data/m/K/a fenced on its lock record and is paused before each
// request of its commit in turn (by a proxy between it and DynamoDB); B
// takes the lock over, reads the path and commits a write based on what it
// read; then A resumes. In every interleaving A's commit is either refused
// (a conflict) and invisible to every reader, or it stood and B read it:
// never a stale commit after a newer one, never a lost update.
func TestPausedHolderAtEveryRequest(t *testing.T) {
	proxy, err := faultproxy.Start(ddblocal.Endpoint(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	var p pauser
	proxy.SetDecider(p.decide)
	cfgA := ddblocal.Config(t)
	cfgA.BaseEndpoint = &proxy.URL
	table := ddblocal.TableName(t)
	ddblocal.CreateTable(t, ddblocal.Client(t), dynamofs.TableInput(table))
	open := func(api dynamostore.API) *datastore.Store {
		d, err := dynamofs.Open(t.Context(), api, dynamofs.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		s := datastore.New(d)
		t.Cleanup(func() { s.Close() })
		return s
	}
	sA := open(dynamostore.NewClient(cfgA, ""))
	sB := open(dynamostore.NewClient(ddblocal.Config(t), ""))

	reachedAll, refused := false, 0
	for k := 0; k < 30 && !reachedAll; k++ {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		key := fmt.Sprintf("rec/default/sync%d", k)
		path := fmt.Sprintf("data/m/%d/a", k)
		tokA, tokB := []byte(fmt.Sprintf(`{"token":%d}`, 2*k+1)), []byte(fmt.Sprintf(`{"token":%d}`, 2*k+2))
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
		p.arm(k)
		done := make(chan error, 1)
		go func() {
			_, err := sA.Commit(ctx, fenceA, []datastore.Entry{{Put: &stA}})
			done <- err
		}()
		var aErr error
		select {
		case <-p.paused:
		case aErr = <-done:
			// A's commit sent fewer than k+1 requests: every request
			// has been paused at.
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
		close(p.release)
		aErr = <-done

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
		p.mu.Lock()
		ops := strings.Join(p.ops, " ")
		p.mu.Unlock()
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
		t.Logf("paused before request %d of %s: A's commit %v", k, ops, aErr)
		cancel()
	}
	if !reachedAll {
		t.Fatal("A's commit never finished unpaused within 30 requests")
	}
	if refused == 0 {
		t.Fatal("no interleaving refused A's commit: the pause never fell before its commit point")
	}
}

package workload

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/metastore/remotestore"
	"github.com/lakemeta/lake/migrate/nodewatch"
	"github.com/lakemeta/lake/server"
)

// nodes is a fleet of lake serve nodes (in process, each on its own
// loopback port, each following the migration) that clients reach through
// the remote store.
type nodes struct {
	open    func(context.Context) (*metastore.Store, error)
	refresh time.Duration

	mu       sync.Mutex
	live     []*node
	retiring []*node
	gen      int
}

type node struct {
	url     string
	hs      *http.Server
	store   *metastore.Store
	watcher *nodewatch.Watcher
}

func (f *nodes) start(ctx context.Context, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen++
	for i := range n {
		nd, err := f.startNode(ctx, fmt.Sprintf("node-%d-gen%d", i, f.gen))
		if err != nil {
			return err
		}
		f.live = append(f.live, nd)
	}
	return nil
}

func (f *nodes) startNode(ctx context.Context, id string) (*node, error) {
	s, err := f.open(ctx)
	if err != nil {
		return nil, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := nodewatch.Watch(ctx, s.Driver().(*dynamostore.Driver), id, "commit", f.refresh, quiet)
	if err != nil {
		return nil, err
	}
	adm := server.NewAdmission()
	adm.AddSource(w)
	srv, err := server.New(s, &server.Options{NodeID: id, Admission: adm, Collectors: w.Collectors(), Logger: quiet, RetryAfter: time.Second})
	if err != nil {
		return nil, err
	}
	url, hs, err := server.ServeLoopback(srv)
	if err != nil {
		return nil, err
	}
	return &node{url: url, hs: hs, store: s, watcher: w}, nil
}

// client opens a remote store on the node of client c.
func (f *nodes) client(_ context.Context, c int) (*metastore.Store, error) {
	f.mu.Lock()
	url := f.live[c%len(f.live)].url
	f.mu.Unlock()
	d, err := remotestore.New(url, nil)
	if err != nil {
		return nil, err
	}
	return metastore.New(d), nil
}

// startNext starts a new generation of nodes; new clients open on them,
// and retire stops the previous generation once clients moved.
func (f *nodes) startNext(ctx context.Context) error {
	f.mu.Lock()
	old := f.live
	f.live = nil
	f.mu.Unlock()
	if err := f.start(ctx, len(old)); err != nil {
		return err
	}
	f.mu.Lock()
	f.retiring = append(f.retiring, old...)
	f.mu.Unlock()
	return nil
}

// retire stops the previous generation: a graceful shutdown, so requests
// in flight finish; the registry entry is left and the store closed.
func (f *nodes) retire(context.Context) error {
	time.Sleep(100 * time.Millisecond) // clients reopen before their next operation
	f.mu.Lock()
	old := f.retiring
	f.retiring = nil
	f.mu.Unlock()
	stopAll(old)
	return nil
}

func (f *nodes) stop() {
	f.mu.Lock()
	old := append(f.live, f.retiring...)
	f.live, f.retiring = nil, nil
	f.mu.Unlock()
	stopAll(old)
}

func stopAll(ns []*node) {
	for _, n := range ns {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		n.hs.Shutdown(ctx)
		n.watcher.Close(ctx)
		n.store.Close()
		cancel()
	}
}

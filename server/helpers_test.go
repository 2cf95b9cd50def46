package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/lakemeta/lake/metastore"
)

// faulty wraps a driver and fails or blocks on demand, and counts the
// backend calls, so tests can drive every error path of the handler and
// measure what a catalog refresh costs.
type faulty struct {
	metastore.Driver

	mu       sync.Mutex
	err      error   // returned by every operation while set
	listErrs []error // returned by the next List calls, one each, before err

	gets, lists atomic.Int64

	// putGate, when set, makes Put wait for it to close (after signalling
	// putEntered), to hold a mutation in flight.
	putGate    chan struct{}
	putEntered chan struct{}
}

var errBoom = errors.New("disk on fire")

func (f *faulty) fail(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *faulty) failLists(errs ...error) {
	f.mu.Lock()
	f.listErrs = append(f.listErrs, errs...)
	f.mu.Unlock()
}

func (f *faulty) current() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *faulty) Get(ctx context.Context, key string) ([]byte, error) {
	f.gets.Add(1)
	if err := f.current(); err != nil {
		return nil, err
	}
	return f.Driver.Get(ctx, key)
}

func (f *faulty) Put(ctx context.Context, key string, value []byte) error {
	if err := f.current(); err != nil {
		return err
	}
	f.mu.Lock()
	gate, entered := f.putGate, f.putEntered
	f.mu.Unlock()
	if gate != nil {
		entered <- struct{}{}
		<-gate
	}
	return f.Driver.Put(ctx, key, value)
}

func (f *faulty) CAS(ctx context.Context, key string, e metastore.Expect, value []byte) error {
	if err := f.current(); err != nil {
		return err
	}
	return f.Driver.CAS(ctx, key, e, value)
}

func (f *faulty) List(ctx context.Context, prefix string, limit int, pos []byte) ([]metastore.Item, []byte, error) {
	f.lists.Add(1)
	f.mu.Lock()
	var err error
	if len(f.listErrs) > 0 {
		err, f.listErrs = f.listErrs[0], f.listErrs[1:]
	}
	f.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	if err := f.current(); err != nil {
		return nil, nil, err
	}
	return f.Driver.List(ctx, prefix, limit, pos)
}

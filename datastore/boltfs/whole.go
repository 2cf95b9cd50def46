package boltfs

import (
	"sync"

	"github.com/lakemeta/lake/datastore"
)

// CommitsWhole implements datastore.WholeCommitter: a commit of any size is
// one bbolt transaction, so it is atomic whatever its size; MaxCommit only
// bounds what the driver reports to a node's clients.
func (d *Driver) CommitsWhole() bool { return true }

// faultHook is the test hook of datastore.WriteFaulter.
type faultHook struct {
	mu sync.Mutex
	f  func() error
}

func (h *faultHook) check() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil {
		return nil
	}
	return h.f()
}

// SetWriteFault implements datastore.WriteFaulter: f is called before each
// write transaction (a commit is one), which fails with its error.
func (d *Driver) SetWriteFault(f func() error) {
	d.fault.mu.Lock()
	defer d.fault.mu.Unlock()
	d.fault.f = f
}

var (
	_ datastore.WholeCommitter = (*Driver)(nil)
	_ datastore.WriteFaulter   = (*Driver)(nil)
)

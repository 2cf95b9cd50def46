package boltfs

import (
	"github.com/lakemeta/lake/datastore"
)

// CommitsWhole implements datastore.WholeCommitter: a commit of any size is
// one bbolt transaction, so it is atomic whatever its size; MaxCommit only
// bounds what the driver reports to a node's clients.
func (d *Driver) CommitsWhole() bool { return true }

// faultHook is the test hook of datastore.WriteFaulter.
type faultHook = datastore.WriteFault

// SetWriteFault implements datastore.WriteFaulter: f is called before each
// write transaction (a commit is one), which fails with its error.
func (d *Driver) SetWriteFault(f func() error) {
	d.fault.Set(f)
}

var (
	_ datastore.WholeCommitter = (*Driver)(nil)
	_ datastore.WriteFaulter   = (*Driver)(nil)
)

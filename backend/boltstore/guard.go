package boltstore

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/lakemeta/lake/metastore"
	bolt "go.etcd.io/bbolt"
)

// ErrDamaged is returned when the file is damaged: by Open for what it can
// check before bbolt maps the file (meta pages, length), and, together with
// metastore.ErrUnavailable, by every call after a fault on a damaged page.
// The file is left as it was; `lake check` reports what is wrong.
var ErrDamaged = errors.New("lake: bolt file is damaged")

// bbolt reads pages straight from its memory map. A page past the end of a
// short file raises SIGBUS, and a page whose header or elements are garbage
// trips one of bbolt's assertions (a panic) or sends it to an address outside
// the map (SIGSEGV). Left alone, each kills the process. guard turns them
// into an error on the goroutine that touched the map: debug.SetPanicOnFault
// makes a fault a panic there, and recover catches both. After one, bbolt
// may still hold its own locks and the damage may reach pages a write would
// copy, so the driver is poisoned: every later call answers the same error
// and nothing is written again.

// guard runs fn, which reads the map, converting a fault or panic in it
// into a poisoning error. op names the call in that error.
func (d *Driver) guard(op string, fn func() error) error {
	if p := d.poison.Load(); p != nil {
		return *p
	}
	r, err := contain(fn)
	if r != nil {
		return d.poisonWith(op, r)
	}
	return err
}

// contain runs fn with faults made panics on this goroutine and returns what
// a panic in fn carried (nil if none) besides fn's error.
func contain(fn func() error) (r any, err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		r = recover()
	}()
	return nil, fn()
}

// view runs fn in a read transaction under guard.
func (d *Driver) view(op string, fn func(tx *bolt.Tx) error) error {
	return d.guard(op, func() error { return d.db.View(fn) })
}

// poisonWith records the first fault and returns the error every call
// answers from now on.
func (d *Driver) poisonWith(op string, r any) error {
	var err error = &poisonError{msg: fmt.Sprintf("%v: %s: %s %s; the store refuses every further call and writes nothing; run `lake check --store bolt://%s` once no process holds the file",
		ErrDamaged, d.path, op, describeFault(r), d.path)}
	d.poison.CompareAndSwap(nil, &err)
	return *d.poison.Load()
}

// describeFault says in a few words what r, a recovered value, was.
func describeFault(r any) string {
	if f, ok := r.(interface{ Addr() uintptr }); ok {
		return fmt.Sprintf("faulted reading a damaged page (address %#x)", f.Addr())
	}
	return fmt.Sprintf("stopped on a damaged page (%v)", r)
}

// poisonError is the error of a poisoned driver. It matches ErrDamaged and,
// since the store cannot serve anything until the file is dealt with,
// metastore.ErrUnavailable (HTTP 503 on a node).
type poisonError struct{ msg string }

func (e *poisonError) Error() string { return e.msg }

func (e *poisonError) Is(target error) bool {
	return target == ErrDamaged || target == metastore.ErrUnavailable
}

// Poisoned reports the error that poisoned the driver, or nil while it is
// sound.
func (d *Driver) Poisoned() error {
	if p := d.poison.Load(); p != nil {
		return *p
	}
	return nil
}

// Health implements metastore.Health: the poisoning error, once a fault
// was met.
func (d *Driver) Health() error { return d.Poisoned() }

var _ metastore.Health = (*Driver)(nil)

// closeWithin closes db unless that takes longer than wait: after a fault
// bbolt may still hold the locks Close takes. The file lock then lasts until
// the process exits, which is what a poisoned store is about to do.
func closeWithin(db *bolt.DB, wait time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- db.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(wait):
		return fmt.Errorf("%w: closing the damaged bolt file %s did not finish within %v; the process releases it when it exits", ErrDamaged, db.Path(), wait)
	}
}

package boltfile

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/lakemeta/lake/metastore"
	bolt "go.etcd.io/bbolt"
)

// ErrDamaged is returned when the file is damaged: by Open for what it can
// check before bbolt maps the file (meta pages, length, branch pages), and,
// together with metastore.ErrUnavailable, by every call after a fault on a
// damaged page. The file is left as it was; `lake check` reports what is
// wrong.
var ErrDamaged = errors.New("lake: bolt file is damaged")

// bbolt reads pages straight from its memory map. A page past the end of a
// short file raises SIGBUS, and a page whose header or elements are garbage
// trips one of bbolt's assertions (a panic) or sends it to an address outside
// the map (SIGSEGV). Left alone, each kills the process. Guard turns them
// into an error on the goroutine that touched the map: debug.SetPanicOnFault
// makes a fault a panic there, and recover catches both. After one, bbolt
// may still hold its own locks and the damage may reach pages a write would
// copy, so the File is poisoned: every later call answers the same error
// and nothing is written again.

// Guard runs fn, which reads the map (through a Tx, Bucket or Cursor, or
// memory they returned), converting a fault or panic in it into a poisoning
// error. op names the call in that error. fn MUST NOT start goroutines that
// touch the map: a fault there cannot be contained.
func (f *File) Guard(op string, fn func() error) error {
	if p := f.poison.Load(); p != nil {
		return *p
	}
	r, err := contain(fn)
	if r != nil {
		return f.Poison(op, r)
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

// Poison records the first damage met (r: a recovered value, or a string
// saying what a caller found that no sound file holds) and returns the
// error every call answers from now on.
func (f *File) Poison(op string, r any) error {
	var err error = &poisonError{msg: fmt.Sprintf("%v: %s: %s %s; the store refuses every further call and writes nothing; run `lake check --store bolt://%s` once no process holds the file",
		ErrDamaged, f.path, op, describeFault(r), f.path)}
	f.poison.CompareAndSwap(nil, &err)
	return *f.poison.Load()
}

// describeFault says in a few words what r, a recovered value, was.
func describeFault(r any) string {
	if f, ok := r.(interface{ Addr() uintptr }); ok {
		return fmt.Sprintf("faulted reading a damaged page (address %#x)", f.Addr())
	}
	return fmt.Sprintf("stopped on a damaged page (%v)", r)
}

// poisonError is the error of a poisoned File. It matches ErrDamaged and,
// since the store cannot serve anything until the file is dealt with,
// metastore.ErrUnavailable (HTTP 503 on a node).
type poisonError struct{ msg string }

func (e *poisonError) Error() string { return e.msg }

func (e *poisonError) Is(target error) bool {
	return target == ErrDamaged || target == metastore.ErrUnavailable
}

// Poisoned reports the error that poisoned the File, or nil while it is
// sound.
func (f *File) Poisoned() error {
	if p := f.poison.Load(); p != nil {
		return *p
	}
	return nil
}

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

package boltfile

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/lakemeta/lake/metastore"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// ErrLocked is returned by Open when another process holds the file.
var ErrLocked = errors.New("lake: bolt file is locked by another process")

// ErrMissing is returned by Open when the file does not exist and
// Options.Create is not set.
var ErrMissing = errors.New("lake: bolt file does not exist")

// ErrNotStore is returned for a file that is not a lake store: a file of
// zero bytes (by Open unless Options.Init), or a bbolt file without the
// buckets its user needs (by that user).
var ErrNotStore = errors.New("lake: not a lake store")

// Options configure Open. The zero value opens an existing file for reading
// and writing.
type Options struct {
	// Create creates the file if it does not exist.
	Create bool
	// Init is Create that also accepts a zero-byte file (bbolt makes it a
	// bbolt file) and a bbolt file written without a freelist (bbolt
	// writes one on opening it). Only `lake init` uses it.
	Init bool
	// ReadOnly opens the file for reading only, under bbolt's shared lock:
	// several readers may hold it at once (but not beside a writer), and the
	// file is never written. Update answers metastore.ErrRefused.
	ReadOnly bool
	// LockTimeout bounds the wait for another process's file lock; zero
	// means one second. It is never unbounded: a hang is worse than an error.
	LockTimeout time.Duration
}

// File is an open bbolt file. Its methods are safe for concurrent use.
type File struct {
	db      *bolt.DB
	path    string
	created bool
	// poison holds the error of the first fault on a damaged page; once
	// set, no call reaches bbolt again (guard.go).
	poison atomic.Pointer[error]
}

// Open opens the bbolt file at path. opts may be nil.
//
// Before bbolt maps the file, Open checks both meta pages, that the file is
// as long as they say, and the branch pages of its top-level trees, and
// refuses a damaged file with ErrDamaged, leaving it untouched. Opening
// writes nothing to an existing file; only Create (a missing file) and
// Init (a zero-byte file) make one.
func Open(path string, opts *Options) (*File, error) {
	if opts == nil {
		opts = &Options{}
	}
	if path == "" {
		return nil, fmt.Errorf("%w: empty bolt file path", metastore.ErrInvalidArgument)
	}
	if opts.ReadOnly && (opts.Create || opts.Init) {
		return nil, fmt.Errorf("%w: a read-only bolt store cannot create its file", metastore.ErrInvalidArgument)
	}
	create := opts.Create || opts.Init
	st, err := os.Stat(path)
	missing := errors.Is(err, os.ErrNotExist)
	switch {
	case missing && !create:
		return nil, fmt.Errorf("%w: %s (run `lake init` to create it)", ErrMissing, path)
	case err == nil && st.IsDir():
		return nil, fmt.Errorf("%w: %s is a directory, not a bolt file", metastore.ErrInvalidArgument, path)
	case err == nil && !st.Mode().IsRegular():
		// A FIFO or a device would block or be read forever.
		return nil, fmt.Errorf("%w: %s is not a regular file (%v)", metastore.ErrInvalidArgument, path, st.Mode().Type())
	case err == nil && st.Size() == 0 && !opts.Init:
		return nil, fmt.Errorf("%w: %s is empty (0 bytes); run `lake --store bolt://%s init` to make it a new store", ErrNotStore, path, path)
	case err == nil && st.Size() > 0:
		shape, err := readShape(path)
		if err == nil {
			err = checkTrees(path, shape)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v; the file was not changed (see `lake check --store bolt://%s`)", ErrDamaged, path, err, path)
		}
		if shape.active.freelist == noFreelist && !opts.ReadOnly && !opts.Init {
			// bbolt would write a freelist on opening it; lake always keeps one.
			return nil, fmt.Errorf("%w: %s is a bbolt file written without a freelist, not by lake; run `lake --store bolt://%s init` to make it a store", ErrNotStore, path, path)
		}
	}

	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = time.Second
	}
	var db *bolt.DB
	// bbolt reads the freelist page while opening for writing: a damaged
	// one must not take the process down either.
	r, err := contain(func() (err error) {
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, ReadOnly: opts.ReadOnly})
		return err
	})
	switch {
	case r != nil:
		return nil, fmt.Errorf("%w: %s: opening it %s; the file was not changed (see `lake check --store bolt://%s`)", ErrDamaged, path, describeFault(r), path)
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, fmt.Errorf("%w: %s (a running `lake serve` node holds it? point --store at the node: --store http://HOST:PORT)", ErrLocked, path)
	case err != nil:
		return nil, fmt.Errorf("lake: open bolt file %s: %w", path, err)
	}
	return &File{db: db, path: path, created: missing}, nil
}

// checkTrees runs checkAcyclic on the file at path.
func checkTrees(path string, shape fileShape) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return checkAcyclic(f, shape)
}

// Path returns the file's path.
func (f *File) Path() string { return f.path }

// ReadOnly reports whether the file is open for reading only.
func (f *File) ReadOnly() bool { return f.db.IsReadOnly() }

// Created reports whether Open created the file.
func (f *File) Created() bool { return f.created }

// View runs fn in a read transaction under the fault guard. op names the
// call in a poisoning error.
func (f *File) View(op string, fn func(tx *Tx) error) error {
	return f.Guard(op, func() error { return f.db.View(fn) })
}

// Update runs fn in a write transaction under the fault guard, and commits
// it (fsynced) if fn returns nil. A read-only File refuses with
// metastore.ErrRefused.
func (f *File) Update(op string, fn func(tx *Tx) error) error {
	if f.db.IsReadOnly() {
		return fmt.Errorf("%w: bolt file %s is open read-only", metastore.ErrRefused, f.path)
	}
	return f.Guard(op, func() error { return f.db.Update(fn) })
}

// Close closes the file. A poisoned File gives up waiting for bbolt after a
// second (see closeWithin).
func (f *File) Close() error {
	if f.Poisoned() != nil {
		return closeWithin(f.db, time.Second)
	}
	return f.db.Close()
}

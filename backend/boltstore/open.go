package boltstore

import (
	"errors"
	"fmt"
	"os"
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

// ErrNotStore is returned by Open for a file that is not a lake store: a
// file of zero bytes, or a bbolt file without lake's buckets. Only
// Options.Init (`lake init`) makes one of them a store.
var ErrNotStore = errors.New("lake: not a lake store")

// Options configure Open. The zero value opens an existing store for
// reading and writing and never changes its layout.
type Options struct {
	// Create creates the file and its buckets if it does not exist (and
	// gives lake's buckets to a bbolt file that has no bucket at all, which
	// is what a creation interrupted by a crash leaves). `lake serve` and
	// the benchmarks use it.
	Create bool
	// Init is Create that also makes an empty (zero-byte) file or a bbolt
	// file without lake's buckets a store, adding the buckets beside what is
	// there. Only `lake init` uses it: it is the one way to turn a file that
	// is not a store into one.
	Init bool
	// LockTimeout bounds the wait for another process's file lock; zero
	// means one second. It is never unbounded: a hang is worse than an error.
	LockTimeout time.Duration
	// ReadOnly opens the file for reading only: bbolt's shared lock, so
	// several readers may hold the file at once (but not beside a writer),
	// and the file is never written. Writes answer metastore.ErrRefused.
	ReadOnly bool
}

// Open opens the bbolt file at path. opts may be nil.
//
// Before bbolt maps the file, Open checks both meta pages and that the file
// is as long as they say, and refuses a damaged file with ErrDamaged,
// leaving it untouched. It refuses a file that is not a store with
// ErrNotStore, and adds lake's buckets only as Options.Create and
// Options.Init allow. Opening an existing store changes nothing in it.
func Open(path string, opts *Options) (*Driver, error) {
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
	d := &Driver{db: db, path: path}
	if err := d.ensureBuckets(opts, missing); err != nil {
		if d.Poisoned() != nil {
			closeWithin(db, time.Second)
		} else {
			db.Close()
		}
		return nil, err
	}
	return d, nil
}

// ensureBuckets checks that the file holds lake's buckets and creates them
// where opts allow: in a file Open just created, in a bbolt file without any
// bucket (Create), or beside another program's buckets (Init). A store that
// has them is not written to.
func (d *Driver) ensureBuckets(opts *Options, created bool) error {
	var have, empty bool
	err := d.view("open", func(tx *bolt.Tx) error {
		have = tx.Bucket(dataBucket) != nil && tx.Bucket(controlBucket) != nil
		first, _ := tx.Cursor().First()
		empty = first == nil
		return nil
	})
	switch {
	case err != nil || have:
		return err
	case opts.ReadOnly || !(opts.Init || opts.Create && (created || empty)):
		return fmt.Errorf("%w: %s is a bbolt file without lake's buckets (another program's file?); run `lake --store bolt://%s init` to add them, or point --store at a lake store", ErrNotStore, d.path, d.path)
	}
	return d.guard("create buckets", func() error {
		return d.db.Update(func(tx *bolt.Tx) error {
			for _, b := range [][]byte{dataBucket, controlBucket} {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return fmt.Errorf("lake: initialize bolt file %s: %w", d.path, err)
				}
			}
			return nil
		})
	})
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

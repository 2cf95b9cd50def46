package boltstore

import (
	"fmt"
	"time"

	"github.com/lakemeta/lake/internal/boltfile"
)

// ErrLocked is returned by Open when another process holds the file.
var ErrLocked = boltfile.ErrLocked

// ErrMissing is returned by Open when the file does not exist and
// Options.Create is not set.
var ErrMissing = boltfile.ErrMissing

// ErrNotStore is returned by Open for a file that is not a lake store: a
// file of zero bytes, or a bbolt file without lake's buckets. Only
// Options.Init (`lake init`) makes one of them a store.
var ErrNotStore = boltfile.ErrNotStore

// ErrDamaged is returned when the file is damaged: by Open for what it can
// check before bbolt maps the file (meta pages, length), and, together with
// metastore.ErrUnavailable, by every call after a fault on a damaged page.
// The file is left as it was; `lake check` reports what is wrong.
var ErrDamaged = boltfile.ErrDamaged

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

// Open opens the bbolt file at path (through boltfile.Open, which checks it
// before bbolt maps it and refuses a damaged file with ErrDamaged, leaving
// it untouched). opts may be nil. It refuses a file that is not a store with
// ErrNotStore, and adds lake's buckets only as Options.Create and
// Options.Init allow. Opening an existing store changes nothing in it.
func Open(path string, opts *Options) (*Driver, error) {
	if opts == nil {
		opts = &Options{}
	}
	f, err := boltfile.Open(path, &boltfile.Options{Create: opts.Create, Init: opts.Init, ReadOnly: opts.ReadOnly, LockTimeout: opts.LockTimeout})
	if err != nil {
		return nil, err
	}
	d := &Driver{f: f}
	if err := d.ensureBuckets(opts, f.Created()); err != nil {
		f.Close()
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
	err := d.f.View("open", func(tx *boltfile.Tx) error {
		have = tx.Bucket(dataBucket) != nil && tx.Bucket(controlBucket) != nil
		first, _ := tx.Cursor().First()
		empty = first == nil
		return nil
	})
	switch {
	case err != nil || have:
		return err
	case opts.ReadOnly || !(opts.Init || opts.Create && (created || empty)):
		return fmt.Errorf("%w: %s is a bbolt file without lake's buckets (another program's file?); run `lake --store bolt://%s init` to add them, or point --store at a lake store", ErrNotStore, d.f.Path(), d.f.Path())
	}
	return d.f.Update("create buckets", func(tx *boltfile.Tx) error {
		for _, b := range [][]byte{dataBucket, controlBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("lake: initialize bolt file %s: %w", d.f.Path(), err)
			}
		}
		return nil
	})
}

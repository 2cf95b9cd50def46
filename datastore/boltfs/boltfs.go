// Package boltfs is the embedded datastore driver: buckets of its own in a
// bbolt file, the same file as the bolt metastore if the caller wishes, so
// that one node serves both.
//
// Every operation is one bbolt transaction, and bbolt has one writer at a
// time, so a commit (fence check, entries, feed entries, heads, index) is
// atomic and positions are assigned in commit order: a change is visible
// exactly when every change before it is.
//
// # Buckets
//
// NB: bucket names and encodings are part of the file format; they must not
// change. Every name starts with "datastore." so that none can collide with
// the metastore's buckets ("data", "control").
//
//	datastore.files     path → the path's latest state (JSON), tombstones included
//	datastore.feed      partition NUL pos(8, big-endian) → path: one entry per path, its latest change
//	datastore.heads     partition → {seq, floor, iseq} (JSON)
//	datastore.index     iseq(8) → partition: one entry per partition, its latest change
//	datastore.meta      "iseq" → the index counter
//	datastore.registry  partition → ""
//	datastore.chunks    version "/" i(4) → bytes
//	datastore.intents   version → {path, started} (JSON): uploads not yet committed
//	datastore.garbage   time(8) version → chunks(4): replaced versions
//	datastore.tombs     time(8) path → pos(8): tombstones to purge after the horizon
//	datastore.records   key → value: lock records
//	datastore.ns        NAMESPACE → the same buckets but records, for each namespace but the root
package boltfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Name is the backend name carried by this driver's cursors.
const Name = "bolt"

// maxCommit is the default bound of one commit's entries: bbolt has no
// limit of its own, but a bound keeps one transaction (and the writer's
// lock) short.
const maxCommit = 1000

var (
	bFiles    = []byte("datastore.files")
	bFeed     = []byte("datastore.feed")
	bHeads    = []byte("datastore.heads")
	bIndex    = []byte("datastore.index")
	bMeta     = []byte("datastore.meta")
	bRegistry = []byte("datastore.registry")
	bChunks   = []byte("datastore.chunks")
	bIntents  = []byte("datastore.intents")
	bGarbage  = []byte("datastore.garbage")
	bTombs    = []byte("datastore.tombs")
	bRecords  = []byte("datastore.records")
	bNS       = []byte("datastore.ns")
	allBkts   = [][]byte{bFiles, bFeed, bHeads, bIndex, bMeta, bRegistry, bChunks, bIntents, bGarbage, bTombs, bRecords, bNS}
	// nsBkts are the buckets of a namespace: all but the records, which
	// every namespace shares with the root.
	nsBkts  = [][]byte{bFiles, bFeed, bHeads, bIndex, bMeta, bRegistry, bChunks, bIntents, bGarbage, bTombs}
	keyISeq = []byte("iseq")
)

// Options configure Open. The zero value is usable.
type Options struct {
	// Create creates the file if it does not exist.
	Create bool
	// LockTimeout bounds the wait for another process's file lock; zero
	// means one second.
	LockTimeout time.Duration
	// MaxCommit bounds the entries of one atomic commit; zero means 1000.
	// Tests lower it to exercise commits split into several writes.
	MaxCommit int
}

// Driver is the bbolt implementation of datastore.Driver.
type Driver struct {
	db        *bolt.DB
	owned     bool // Close closes db
	maxCommit int
	// ns is the namespace's bucket in datastore.ns; nil for the root.
	ns []byte
}

var _ datastore.Driver = (*Driver)(nil)

// Open opens (or with Create, creates) the bbolt file at path and the
// datastore's buckets in it. opts may be nil. The file must not be open
// elsewhere, in this process or another: to share a file with the metastore
// in one process, open it once and use New.
func Open(path string, opts *Options) (*Driver, error) {
	if opts == nil {
		opts = &Options{}
	}
	if path == "" {
		return nil, fmt.Errorf("%w: empty bolt file path", metastore.ErrInvalidArgument)
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && !opts.Create:
		return nil, fmt.Errorf("lake: bolt file does not exist: %s (run `lake data init` to create it)", path)
	case err == nil && st.IsDir():
		return nil, fmt.Errorf("%w: %s is a directory, not a bolt file", metastore.ErrInvalidArgument, path)
	}
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = time.Second
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("lake: bolt file is locked by another process: %s (a running `lake serve` node holds it?)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("lake: open bolt file %s: %w", path, err)
	}
	d, err := New(db)
	if err != nil {
		db.Close()
		return nil, err
	}
	d.owned = true
	if opts.MaxCommit > 0 {
		d.maxCommit = opts.MaxCommit
	}
	return d, nil
}

// New returns a driver over an open bbolt database, creating the datastore's
// buckets if needed. Close does not close db.
func New(db *bolt.DB) (*Driver, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBkts {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lake: initialize datastore buckets: %w", err)
	}
	return &Driver{db: db, maxCommit: maxCommit}, nil
}

// Name returns "bolt".
func (d *Driver) Name() string { return Name }

// MaxCommit returns the most entries of one atomic commit.
func (d *Driver) MaxCommit() int { return d.maxCommit }

// Close closes the file if Open opened it.
func (d *Driver) Close() error {
	if d.owned {
		return d.db.Close()
	}
	return nil
}

// Namespace returns the driver of namespace name ("" for the root) over the
// same file, creating its buckets if they do not exist; in a read-only
// file a namespace that does not exist is an error matching
// metastore.ErrNotFound.
func (d *Driver) Namespace(name string) (datastore.Driver, error) {
	nd := &Driver{db: d.db, maxCommit: d.maxCommit}
	if name == "" {
		return nd, nil
	}
	nd.ns = []byte(name)
	if d.db.IsReadOnly() {
		err := d.db.View(func(tx *bolt.Tx) error {
			if b := tx.Bucket(bNS); b == nil || b.Bucket(nd.ns) == nil {
				return fmt.Errorf("%w: namespace %q holds nothing", metastore.ErrNotFound, name)
			}
			return nil
		})
		return nd, err
	}
	err := d.db.Update(func(tx *bolt.Tx) error {
		root, err := tx.CreateBucketIfNotExists(bNS)
		if err != nil {
			return err
		}
		b, err := root.CreateBucketIfNotExists(nd.ns)
		if err != nil {
			return err
		}
		for _, name := range nsBkts {
			if _, err := b.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lake: initialize namespace %s: %w", name, err)
	}
	return nd, nil
}

// bkt returns bucket name of d's namespace.
func (d *Driver) bkt(tx *bolt.Tx, name []byte) *bolt.Bucket {
	if d.ns == nil {
		return tx.Bucket(name)
	}
	return tx.Bucket(bNS).Bucket(d.ns).Bucket(name)
}

func (d *Driver) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.db.View(fn)
}

func (d *Driver) update(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.db.Update(fn)
}

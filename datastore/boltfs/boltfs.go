// Package boltfs is the embedded datastore driver: buckets of its own in a
// bbolt file, the same file as the bolt metastore if the caller wishes, so
// that one node serves both.
//
// Every operation is one bbolt transaction, and bbolt has one writer at a
// time, so a commit (fence check, entries, feed entries, heads, index) is
// atomic and positions are assigned in commit order: a change is visible
// exactly when every change before it is.
//
// # The file
//
// The driver does not open bbolt itself: internal/boltfile, the one owner
// of lake's bolt file, opens it (read-only under a shared lock for the
// commands that only read), checks it before bbolt maps it, runs every call
// under its fault guard and poisons it at the first damage, for this driver
// and the metastore's alike (a node shares one File between them, so damage
// met by either stops both). Reads never write: a bucket or namespace that
// does not exist reads as empty, and Init or the first write creates it. A
// record lake cannot have written (JSON that does not parse, a feed entry
// that disagrees with its file) is damage: it poisons the file as a fault
// does.
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
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/boltfile"
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

// Options configure Open. The zero value opens an existing file for reading
// and writing.
type Options struct {
	// Create creates the file if it does not exist, and accepts a zero-byte
	// file (`lake data init`).
	Create bool
	// ReadOnly opens the file for reading only, under bbolt's shared lock:
	// the file is never written, and writes answer metastore.ErrRefused.
	ReadOnly bool
	// LockTimeout bounds the wait for another process's file lock; zero
	// means one second.
	LockTimeout time.Duration
	// MaxCommit bounds the entries of one atomic commit; zero means 1000.
	// Tests lower it to exercise commits split into several writes.
	MaxCommit int
}

// Driver is the bbolt implementation of datastore.Driver.
type Driver struct {
	// f opens, checks, guards and poisons the file (internal/boltfile):
	// every bbolt call of the driver runs under its guard.
	f         *boltfile.File
	owned     bool // Close closes f
	maxCommit int
	// ns is the namespace's bucket in datastore.ns; nil for the root.
	ns []byte
	// layout is the datastore's partition rule (SetLayout, layout.go).
	layout datastore.Layout
	// fault is the test hook of datastore.WriteFaulter (whole.go).
	fault *faultHook
}

var _ datastore.Driver = (*Driver)(nil)

// Open opens the bbolt file at path (through boltfile.Open: a damaged file
// is refused with boltfile.ErrDamaged, unchanged). opts may be nil. Opening
// writes nothing: the datastore's buckets are made by Init or by the first
// write, and a bucket or namespace that does not exist reads as empty. A
// missing file is boltfile.ErrMissing and a zero-byte one
// boltfile.ErrNotStore (each naming `lake init`), unless Options.Create.
// The file must not be open elsewhere, in this process or another: to share
// a file with the metastore in one process, open it once and use New.
func Open(path string, opts *Options) (*Driver, error) {
	if opts == nil {
		opts = &Options{}
	}
	f, err := boltfile.Open(path, &boltfile.Options{Init: opts.Create, ReadOnly: opts.ReadOnly, LockTimeout: opts.LockTimeout})
	if err != nil {
		return nil, err
	}
	d, err := New(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	d.owned = true
	if opts.MaxCommit > 0 {
		d.maxCommit = opts.MaxCommit
	}
	if opts.Create {
		if err := d.Init(context.Background()); err != nil {
			f.Close()
			return nil, err
		}
	}
	return d, nil
}

// New returns a driver over an open file; it writes nothing. A file already
// poisoned (damage met) is refused with its error. Close does not close f.
func New(f *boltfile.File) (*Driver, error) {
	if err := f.Poisoned(); err != nil {
		return nil, err
	}
	return &Driver{f: f, maxCommit: maxCommit, fault: &faultHook{}}, nil
}

// Init creates the datastore's buckets (of the root) if they do not exist;
// on a file that has them it writes nothing.
func (d *Driver) Init(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var have bool
	err := d.f.View("datastore init", func(tx *boltfile.Tx) error {
		have = true
		for _, b := range allBkts {
			if tx.Bucket(b) == nil {
				have = false
			}
		}
		return nil
	})
	if err != nil || have {
		return err
	}
	err = d.f.Update("datastore init", func(tx *boltfile.Tx) error {
		for _, b := range allBkts {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("lake: initialize datastore buckets: %w", err)
	}
	return nil
}

// Name returns "bolt".
func (d *Driver) Name() string { return Name }

// MaxCommit returns the most entries of one atomic commit.
func (d *Driver) MaxCommit() int { return d.maxCommit }

// Close closes the file if Open opened it.
func (d *Driver) Close() error {
	if d.owned {
		return d.f.Close()
	}
	return nil
}

// Namespace returns the driver of namespace name ("" for the root) over the
// same file. It writes nothing: a namespace that does not exist reads as
// empty, and its first write creates its buckets.
func (d *Driver) Namespace(name string) (datastore.Driver, error) {
	nd := &Driver{f: d.f, maxCommit: d.maxCommit, layout: d.layout, fault: d.fault}
	if name != "" {
		nd.ns = []byte(name)
	}
	return nd, nil
}

// bkt returns bucket name of d's namespace, or nil if it does not exist
// (only in a read: update creates them first). Every read MUST handle nil:
// a call on a nil bucket would panic, which the guard takes for damage.
func (d *Driver) bkt(tx *boltfile.Tx, name []byte) *boltfile.Bucket {
	if d.ns == nil {
		return tx.Bucket(name)
	}
	root := tx.Bucket(bNS)
	if root == nil {
		return nil
	}
	ns := root.Bucket(d.ns)
	if ns == nil {
		return nil
	}
	return ns.Bucket(name)
}

// ensure creates what a write of d's namespace needs: the root's buckets
// (the records are shared) and, in a namespace, its own. Buckets that exist
// are only looked up.
func (d *Driver) ensure(tx *boltfile.Tx) error {
	for _, b := range allBkts {
		if tx.Bucket(b) != nil {
			continue
		}
		if _, err := tx.CreateBucket(b); err != nil {
			return fmt.Errorf("lake: initialize datastore bucket %s: %w", b, err)
		}
	}
	if d.ns == nil {
		return nil
	}
	b, err := tx.Bucket(bNS).CreateBucketIfNotExists(d.ns)
	if err != nil {
		return fmt.Errorf("lake: initialize namespace %s: %w", d.ns, err)
	}
	for _, name := range nsBkts {
		if b.Bucket(name) != nil {
			continue
		}
		if _, err := b.CreateBucket(name); err != nil {
			return fmt.Errorf("lake: initialize namespace %s: %w", d.ns, err)
		}
	}
	return nil
}

// damageError is what a read found that no lake write stores (a record that
// does not parse, a feed entry that disagrees with its file): a damaged page
// that bbolt still parses. view and update poison the file with it, as a
// fault would.
type damageError struct{ msg string }

func (e *damageError) Error() string { return e.msg }

func damagef(format string, args ...any) error {
	return &damageError{msg: fmt.Sprintf(format, args...)}
}

// poisonOn poisons the file if err is a damageError.
func (d *Driver) poisonOn(op string, err error) error {
	var de *damageError
	if errors.As(err, &de) {
		return d.f.Poison(op, de.msg)
	}
	return err
}

// view runs fn in a read transaction under the file's guard.
func (d *Driver) view(ctx context.Context, fn func(tx *boltfile.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.poisonOn("datastore read", d.f.View("datastore read", fn))
}

// update runs fn in a write transaction under the file's guard, after
// creating the buckets it needs.
func (d *Driver) update(ctx context.Context, fn func(tx *boltfile.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.fault.Check(); err != nil {
		return err
	}
	return d.poisonOn("datastore write", d.f.Update("datastore write", func(tx *boltfile.Tx) error {
		if err := d.ensure(tx); err != nil {
			return err
		}
		return fn(tx)
	}))
}

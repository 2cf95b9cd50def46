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

// Options configure Open. The zero value is usable.
type Options struct {
	// Create creates the file (and its buckets) if it does not exist.
	Create bool
	// LockTimeout bounds the wait for another process's file lock; zero
	// means one second. It is never unbounded: a hang is worse than an error.
	LockTimeout time.Duration
	// ReadOnly opens the file for reading only (a shared lock).
	ReadOnly bool
}

// Open opens the bbolt file at path. opts may be nil.
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
		return nil, fmt.Errorf("%w: %s (run `lake init` to create it)", ErrMissing, path)
	case err == nil && st.IsDir():
		return nil, fmt.Errorf("%w: %s is a directory, not a bolt file", metastore.ErrInvalidArgument, path)
	}
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = time.Second
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, ReadOnly: opts.ReadOnly})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (a running `lake serve` node holds it? point --store at the node: --store http://HOST:PORT)", ErrLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("lake: open bolt file %s: %w", path, err)
	}
	d := &Driver{db: db, path: path}
	if !opts.ReadOnly {
		err = db.Update(func(tx *bolt.Tx) error {
			for _, b := range [][]byte{dataBucket, controlBucket} {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			return nil
		})
	} else {
		err = db.View(func(tx *bolt.Tx) error {
			if tx.Bucket(dataBucket) == nil {
				return fmt.Errorf("%w: %s has no lake data bucket (run `lake init`)", metastore.ErrInvalidArgument, path)
			}
			return nil
		})
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("lake: initialize bolt file %s: %w", path, err)
	}
	return d, nil
}

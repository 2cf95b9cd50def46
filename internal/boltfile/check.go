package boltfile

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/lakemeta/lake/metastore"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// MaxProblems bounds the problems a Report lists; Report.Found counts all.
const MaxProblems = 20

// Report is what Check found in a file.
type Report struct {
	// Path is the file checked.
	Path string
	// Size is the file's length in bytes.
	Size int64
	// PageSize and Pages (the high-water mark) are what the meta page in
	// use says; zero when no meta page could be read.
	PageSize int
	Pages    uint64
	// Keys counts the keys in lake's data bucket (sound files only; set by
	// the metastore's inspection).
	Keys int
	// Problems lists the first MaxProblems problems, in the order found.
	Problems []string
	// Found counts every problem, listed or not.
	Found int
	// NotStore is set when the file is sound (or empty) but is not a lake
	// store: no lake buckets, or no bytes at all.
	NotStore bool
	// Notes are findings that leave the file sound, such as one torn meta
	// page, which bbolt recovers from by itself.
	Notes []string
}

// Sound reports whether the check found nothing wrong.
func (r *Report) Sound() bool { return r.Found == 0 }

// Add records problems.
func (r *Report) Add(problems ...string) {
	for _, p := range problems {
		if len(r.Problems) < MaxProblems {
			r.Problems = append(r.Problems, p)
		}
		r.Found++
	}
}

// Check checks the bbolt file at path as bbolt's own `bbolt check` does
// (tx.Check: every page reachable once, none both reachable and free, keys
// in order), without ever writing it: the file is opened read-only under a
// shared lock. Before bbolt maps the file, the cheap checks of Open run,
// then a walk of the page tree with plain reads that bounds every page and
// element bbolt's check will touch, so that a damaged file is reported
// rather than faulting. A file that is sound for bbolt but is not a lake
// store (no lake buckets) is reported too.
//
// inspect, if not nil, runs last in the read transaction, on a file the
// walk found sound, to check what only the file's user knows (its buckets,
// its keys); it adds what it finds to rep.
//
// The error is for a file that could not be checked: missing, not a
// regular file, or held by a process that writes it (ErrLocked).
func Check(path string, lockTimeout time.Duration, inspect func(tx *Tx, rep *Report) error) (*Report, error) {
	rep := &Report{Path: path}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%w: %s", ErrMissing, path)
	case err != nil:
		return nil, fmt.Errorf("lake: check %s: %w", path, err)
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%w: %s is not a regular file", metastore.ErrInvalidArgument, path)
	}
	rep.Size = st.Size()
	if rep.Size == 0 {
		rep.Add("the file is empty (0 bytes): not a lake store; `lake init` makes it one")
		rep.NotStore = true
		return rep, nil
	}
	shape, err := readShape(path)
	if err != nil {
		rep.Add(err.Error())
		return rep, nil
	}
	rep.PageSize, rep.Pages = shape.pageSize, shape.active.hwm
	if shape.torn != "" {
		rep.Notes = append(rep.Notes, shape.torn)
	}
	if lockTimeout <= 0 {
		lockTimeout = time.Second
	}
	var db *bolt.DB
	r, err := contain(func() (err error) {
		db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: lockTimeout})
		return err
	})
	switch {
	case r != nil:
		rep.Add("bbolt could not open the file: " + describeFault(r))
		return rep, nil
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, fmt.Errorf("%w: %s (stop the `lake serve` node or the command that holds it, then check again)", ErrLocked, path)
	case err != nil:
		rep.Add("bbolt could not open the file: " + err.Error())
		return rep, nil
	}
	// Under the shared lock no lake process writes the file: walk it now.
	f, err := os.Open(path)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("lake: check %s: %w", path, err)
	}
	w := &walker{r: f, pageSize: shape.pageSize, hwm: shape.active.hwm, seen: map[uint64]bool{0: true, 1: true}}
	w.freelist(shape.active.freelist)
	w.tree(shape.active.root, rootBucket)
	f.Close()
	if len(w.problems) > 0 {
		rep.Add(w.problems...)
		db.Close()
		return rep, nil
	}
	file := &File{db: db, path: path}
	err = file.View("check", func(tx *Tx) error {
		if shape.torn != "" {
			// bbolt's check asserts that both meta pages are meta pages;
			// the walk above has checked the tree the valid one roots.
			rep.Notes = append(rep.Notes, "bbolt's own check skipped (it rejects a torn meta page); the next write rewrites the page, check again after it")
		} else {
			for err := range tx.Check() {
				// Drain the channel: bbolt's checking goroutine stops only
				// when every error is taken.
				rep.Add(err.Error())
			}
		}
		if inspect == nil {
			return nil
		}
		return inspect(tx, rep)
	})
	if err != nil {
		rep.Add(err.Error())
		closeWithin(db, time.Second)
		return rep, nil
	}
	return rep, db.Close()
}

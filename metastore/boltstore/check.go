package boltstore

import (
	"fmt"
	"time"

	"github.com/lakemeta/lake/internal/boltfile"
	"github.com/lakemeta/lake/metastore"
)

// MaxProblems bounds the problems a Report lists; Report.Found counts all.
const MaxProblems = boltfile.MaxProblems

// Report is what Check found in a file.
type Report = boltfile.Report

// Check checks the bbolt file at path as bbolt's own `bbolt check` does
// (tx.Check: every page reachable once, none both reachable and free, keys
// in order), without ever writing it: the file is opened read-only under a
// shared lock. Before bbolt maps the file, the cheap checks of Open run,
// then a walk of the page tree with plain reads that bounds every page and
// element bbolt's check will touch, so that a damaged file is reported
// rather than faulting. A file that is sound for bbolt but is not a lake
// store (no lake buckets) is reported too, and so is a key in lake's data
// bucket that no lake write stores.
//
// The error is for a file that could not be checked: missing, not a
// regular file, or held by a process that writes it (ErrLocked).
func Check(path string, lockTimeout time.Duration) (*Report, error) {
	return boltfile.Check(path, lockTimeout, inspect)
}

// inspect checks what only lake's metastore knows: its buckets and its keys.
func inspect(tx *boltfile.Tx, rep *Report) error {
	data, control := tx.Bucket(dataBucket), tx.Bucket(controlBucket)
	if data == nil || control == nil {
		rep.Add("no lake buckets: a bbolt file, but not a lake store; `lake init` adds them")
		rep.NotStore = rep.Found == 1
		return nil
	}
	if rep.Found != 0 {
		return nil
	}
	// bbolt's check cannot know lake's key rules: a key no lake write
	// stores means a damaged page that bbolt still parses.
	bad := 0
	err := data.ForEach(func(k, _ []byte) error {
		if metastore.ValidateKey(string(k)) != nil {
			if bad++; bad == 1 {
				rep.Add(fmt.Sprintf("a key lake cannot have written (%.40q) in lake's data bucket", k))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if bad > 1 {
		rep.Add(fmt.Sprintf("%d more such keys", bad-1))
	}
	if rep.Found == 0 {
		rep.Keys = data.Stats().KeyN
	}
	return nil
}

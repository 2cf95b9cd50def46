// Package boltfile owns lake's bbolt file: it opens it, checks it before
// bbolt maps it, runs every bbolt call under a fault guard, and poisons the
// file at the first fault. Every user of the file (the metastore's driver
// metastore/boltstore, the datastore's driver datastore/boltfs, the locks on
// either, the node) goes through a *File; nothing else in lake imports
// bbolt.
//
// # Opening
//
// A file is open for writing in one process at a time (bbolt's exclusive
// lock), or for reading (Options.ReadOnly: bbolt's shared lock, the file is
// never written) in several. Open waits at most Options.LockTimeout for the
// lock and then fails with ErrLocked. A missing file is ErrMissing unless
// Options.Create, a zero-byte file ErrNotStore unless Options.Init.
//
// # Damage
//
// Before bbolt maps the file, Open reads both meta pages with plain reads
// (meta.go), checks that the file is as long as they say, and walks the
// branch pages of the top-level trees for cycles and for elements that run
// past their page (acyclic.go): a damaged file is ErrDamaged and is left as
// it was. After Open, every bbolt call runs in View, Update or Guard, with
// faults made panics and recovered (guard.go); the first one poisons the
// File: every later call answers the same error (matching ErrDamaged and
// metastore.ErrUnavailable) and nothing is written again. Check walks the
// whole page tree with plain reads before running bbolt's own check
// (check.go, walk.go).
package boltfile

import bolt "go.etcd.io/bbolt"

// Tx, Bucket and Cursor are bbolt's, named here so that the users of a File
// need not import bbolt. They are valid only inside the function given to
// View or Update, which runs under the fault guard.
type (
	Tx     = bolt.Tx
	Bucket = bolt.Bucket
	Cursor = bolt.Cursor
)

// Package treesync keeps a local directory in sync with a datastore: the
// seed's loop (lock, pull what changed, work, push what is dirty, commit the
// changed index entries, release) as a Go API, behind `lake data sync`,
// `lake data run` and `lake data status`.
//
// # State
//
// A tree keeps its state in DIR/.lake/ (never synced): state.json, what was
// last synced (per path: the remote version and position, and the local
// size, mtime and SHA-256 it had then), the feed position of every
// partition pulled, and the unscoped cursor; dirty, the hints MarkDirty
// appended since the last sync; lock, a file lock that keeps two processes
// from syncing one directory at once. state.json is replaced atomically
// (temp file, fsync, rename) only after a sync's commit, so a crash leaves
// the previous state, and the next sync finds its own committed files equal
// to the remote ones and adopts them.
//
// # Dirty paths
//
// With hints (MarkDirty since the last sync, at most Options.MaxHints), the
// dirty paths are exactly the hinted ones. Without them, or when they
// overflowed, a walk of the directory compares each file with its
// last-synced state: the same size and mtime means clean (a file whose
// mtime was too close to its sync to be trusted is hashed), else the
// SHA-256 decides; a synced path missing locally is a delete. Neither reads
// the remote index. Run walks once, after its function; the pull checks
// each path it is about to write, so a local change is never overwritten.
//
// # Push in two phases
//
// Sync uploads the content of dirty files before taking the lock (the
// datastore's uploads are invisible until committed). Under the lock it
// checks the dirty paths against the remote with one batch stat (never a
// pull or a listing): a path whose remote state moved since the last sync is
// a conflict, unless the remote content equals the local one. Conflicts are
// refused, naming the paths, unless Options.Prefer decides. Then it pulls,
// and commits only the dirty entries in one commit fenced by the lock's
// token: a holder that lost the lock commits nothing. Blobs uploaded by a
// sync that never commits are reclaimed by the datastore after its grace
// period.
//
// # Watermarks
//
// Positions are the datastore's, per partition. A scoped pull (Scope.Models)
// advances only the positions of the partitions it read; the unscoped
// cursor (datastore.ChangedPartitions) advances only on an unscoped pull
// that read every partition it named. A scoped pull therefore cannot make
// the next unscoped pull skip another partition's changes, which is how the
// seed's single timestamp watermark was poisoned.
//
// # The working tree is the user's
//
// Every file operation on the tree goes through one os.Root on its
// directory (fsroot.go, the package's only file system access): nothing
// outside the directory is read, written or deleted, and no symbolic link
// is followed, inside the tree either. What the store holds is checked
// before it touches a file: a path under .lake (reserved by the datastore,
// but a foreign writer can bypass it), an invalid path, a path below a link
// or a path that is a file on one side and a directory on the other is
// skipped and named (Report.Skipped, Status.Skipped), and everything else
// syncs; the paths the tree could not write are retried by every later
// sync. A sync that skipped paths returns a *SkippedError (ErrPartial).
// Dirty hints that are not tree paths are ignored with a warning; a
// damaged hints file is walked instead. docs/sync.md states the rules.
//
// # Exclusion
//
// The lock is NAMESPACE/sync in the datastore's own records. Workers that
// write the same paths MUST sync under the same namespace: the lock is what
// serializes their check-then-commit; workers on disjoint models may use one
// namespace each and never contend.
package treesync

package treesync

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/datastore/dslock"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/metastore"
)

// Prefer decides a conflict: a path changed both locally and remotely since
// the last sync.
type Prefer string

// The ways to decide a conflict.
const (
	// PreferNone refuses the sync, naming the conflicting paths.
	PreferNone Prefer = ""
	// PreferLocal pushes the local version over the remote one.
	PreferLocal Prefer = "local"
	// PreferRemote replaces the local file with the remote version.
	PreferRemote Prefer = "remote"
)

// DefaultNamespace is the namespace of a tree whose options name none: the
// datastore's root.
const DefaultNamespace = datastore.DefaultNamespace

// DefaultMaxHints bounds the dirty hints kept; beyond it the walk decides.
const DefaultMaxHints = 10000

// CatalogMode is how a sync keeps its view of the catalog of every
// namespace (package catalog).
type CatalogMode string

// The catalog modes.
const (
	// CatalogIncremental (the default) reads only the catalog's changes
	// since the tree's last sync, and folds the namespace's own changes
	// into it after each commit.
	CatalogIncremental CatalogMode = ""
	// CatalogExport reads the whole catalog on every sync, as the seed's
	// system did (its cost grows with everything the catalog holds); it
	// exists so that the load harness can show that bottleneck. It folds
	// like CatalogIncremental.
	CatalogExport CatalogMode = "export"
	// CatalogOff neither reads nor folds the catalog, nor runs the
	// lifecycle.
	CatalogOff CatalogMode = "off"
)

// Options configure Open. The zero value is usable.
type Options struct {
	// Namespace is the tree's namespace: its files, feeds and index, and
	// its lock NAMESPACE/sync; empty means "default" (the datastore's
	// root).
	Namespace string
	// Catalog is how the tree reads and maintains the catalog.
	Catalog CatalogMode
	// Lock configures the lock (lease, wait, clock skew); nil means the
	// lock package's defaults.
	Lock *lock.Options
	// Prefer decides conflicts; PreferNone refuses them.
	Prefer Prefer
	// MaxHints bounds the paths MarkDirty keeps; zero means
	// DefaultMaxHints.
	MaxHints int
}

// ErrBusy is returned when another process is syncing the same directory.
var ErrBusy = fmt.Errorf("%w: directory busy", metastore.ErrRefused)

// ConflictError is a sync refused because paths changed both locally and
// remotely since the last sync. It matches metastore.ErrConflict; nothing
// was changed, locally or remotely.
type ConflictError struct {
	Paths []string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("lake: conflict: %d path(s) changed both locally and remotely since the last sync: %s; nothing was changed (decide with --prefer local or --prefer remote)",
		len(e.Paths), strings.Join(e.Paths, ", "))
}

// Unwrap makes a ConflictError match metastore.ErrConflict.
func (e *ConflictError) Unwrap() error { return metastore.ErrConflict }

// Scope limits a sync to some partitions. The zero Scope is the whole tree.
type Scope struct {
	// Models are partitions (TYPE/ID models, or top-level directories).
	Models []string
}

// Report says what one sync did.
type Report struct {
	// Token is the fencing token the sync held.
	Token lock.Token
	// Unlocked marks a sync that had nothing to push and found nothing to
	// pull or maintain, so it ended without taking the lock (Token is
	// then zero).
	Unlocked bool
	// LockWait is how long the acquisition took; LockContended how many
	// times it found the lock held by another (zero: it waited for no
	// one, and LockWait is its own requests).
	LockWait      time.Duration
	LockContended int
	// Dirty counts the dirty paths found locally; Uploaded the files
	// uploaded.
	Dirty, Uploaded int
	// Partitions counts the partitions whose feed was read; Changes the
	// feed entries read (a pull reads only these).
	Partitions, Changes int
	// Downloaded and Removed count the local files a pull wrote and
	// deleted.
	Downloaded, Removed int
	// Stated counts the paths checked with the batch stat.
	Stated int
	// Committed counts the index entries committed: the files this sync
	// changed remotely.
	Committed int
	// CatalogRead counts the catalog rows read; CatalogFolded the rows
	// this sync's fold rewrote or removed.
	CatalogRead, CatalogFolded int
	// CatalogForwarded counts the rows of CatalogFolded brought forward
	// from their previous row over the feed; the others were rebuilt from
	// a listing of their model (catalog.FoldStats.Forwarded).
	CatalogForwarded int
	// PrunedModels and PrunedVersions count what the namespace's lifecycle
	// expired during this sync (PrunedFiles the files they held);
	// Reclaimed the tombstones its periodic Reclaim purged.
	PrunedModels, PrunedVersions, PrunedFiles, Reclaimed int
	// Pull, Commit and Lifecycle are how long the pull (catalog read
	// included), the commit and the catalog fold plus lifecycle took.
	Pull, Commit, Lifecycle time.Duration
	// Resolved names the conflicts decided by Options.Prefer.
	Resolved []string
	// Skipped are the paths left unsynced, by path, each with why and the
	// way out; everything else synced. Sync and Run then return a
	// *SkippedError (matching ErrPartial) if nothing else went wrong.
	Skipped []Skipped
	// Warnings are what the sync ignored without skipping a path (dirty
	// hints that are not tree paths, a damaged hints file walked instead).
	Warnings []string
	// stated are the remote states the batch stat read under the lock,
	// for the catalog fold (noteStated).
	stated map[string]datastore.Info
	// committed is what the sync's commit applied, for the catalog fold
	// (catalog.FoldOptions.Committed).
	committed []datastore.Info
	// rows are the catalog rows of the dirty models read ahead under the
	// lock, for the catalog fold (catalog.FoldOptions.Rows).
	rows map[string]datastore.Info
	// pulled is the unscoped pull's read of the namespace's changed
	// partitions, for the catalog fold (catalog.FoldOptions.Pulled).
	pulled *catalog.Pulled
	// plan is the catalog fold planned for the commit to carry
	// (planFold), nil if none was; plan.Stats says if it was carried.
	plan *catalog.Plan
}

// ErrPartial is matched by a sync or run that did everything but skip some
// paths (a *SkippedError).
var ErrPartial = errors.New("lake: partial sync")

// SkippedError is a sync that synced everything except the paths it
// names: its commit, pull and state are kept. It matches ErrPartial.
type SkippedError struct {
	Skipped []Skipped
}

func (e *SkippedError) Error() string {
	return fmt.Sprintf("lake: %d path(s) skipped, everything else synced: %s (see the lines above for each and the way out)", len(e.Skipped), e.first())
}

func (e *SkippedError) first() string {
	var names []string
	for i, s := range e.Skipped {
		if i == 5 {
			names = append(names, fmt.Sprintf("and %d more", len(e.Skipped)-5))
			break
		}
		names = append(names, s.Path)
	}
	return strings.Join(names, ", ")
}

// Unwrap makes a SkippedError match ErrPartial.
func (e *SkippedError) Unwrap() error { return ErrPartial }

// Tree is a local directory synced with a datastore.
type Tree struct {
	dir string
	// fs is the tree's only access to its files (fsroot.go).
	fs *treeFS
	// store is the tree's namespace; root the datastore's default one.
	store  *datastore.Store
	root   *datastore.Store
	opts   Options
	locker *lock.Locker
	now    func() time.Time
}

// Open returns the tree of dir (which must exist) over store. opts may be
// nil. It does no I/O on the store.
func Open(dir string, store *datastore.Store, opts *Options) (*Tree, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if err := datastore.ValidateNamespace(o.Namespace); err != nil {
		return nil, err
	}
	switch o.Catalog {
	case CatalogIncremental, CatalogExport, CatalogOff:
	default:
		return nil, fmt.Errorf("%w: catalog mode %q: want export or off", metastore.ErrInvalidArgument, o.Catalog)
	}
	switch o.Prefer {
	case PreferNone, PreferLocal, PreferRemote:
	default:
		return nil, fmt.Errorf("%w: prefer %q: want local or remote", metastore.ErrInvalidArgument, o.Prefer)
	}
	if o.MaxHints < 0 {
		return nil, fmt.Errorf("%w: negative MaxHints", metastore.ErrInvalidArgument)
	}
	if o.MaxHints == 0 {
		o.MaxHints = DefaultMaxHints
	}
	if store == nil {
		return nil, fmt.Errorf("%w: nil datastore", metastore.ErrInvalidArgument)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("lake: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", metastore.ErrInvalidArgument, dir)
	}
	ns, err := store.Namespace(o.Namespace)
	if err != nil {
		return nil, err
	}
	l, err := lock.New(dslock.New(store), o.Lock)
	if err != nil {
		return nil, err
	}
	tfs, err := openTreeFS(abs)
	if err != nil {
		return nil, err
	}
	return &Tree{dir: abs, fs: tfs, store: ns, root: store.Root(), opts: o, locker: l, now: time.Now}, nil
}

// Close releases the tree's handle on its directory (also released when the
// Tree is garbage collected). The Tree MUST NOT be used after.
func (t *Tree) Close() error { return t.fs.close() }

// LockName is the name of the tree's lock: NAMESPACE/sync.
func (t *Tree) LockName() string { return t.opts.Namespace + "/sync" }

// Dir is the tree's directory.
func (t *Tree) Dir() string { return t.dir }

// MarkDirty records that paths (slash-separated, relative to the tree)
// changed, so that the next Sync checks exactly them instead of walking the
// directory. Hints MUST name every change until the next sync; past
// MaxHints the next sync walks.
func (t *Tree) MarkDirty(paths ...string) error {
	var b strings.Builder
	for _, p := range paths {
		if err := datastore.ValidatePath(p); err != nil {
			return err
		}
		if strings.HasPrefix(p, StateDir+"/") {
			return fmt.Errorf("%w: %s is the tree's own state", metastore.ErrInvalidArgument, p)
		}
		b.WriteString(p)
		b.WriteByte('\n')
	}
	f, err := t.fs.openState(hintsFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return fmt.Errorf("lake: write dirty hints: %w", err)
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("lake: write dirty hints: %w", err)
	}
	return nil
}

// clearHints removes the hints file if it still holds only what the sync
// read (size unchanged); hints added meanwhile stay for the next sync.
func (t *Tree) clearHints(size int64) {
	if fi, err := t.fs.statState(hintsFile); err == nil && fi.Size() == size {
		t.fs.removeState(hintsFile)
	}
}

func (t *Tree) hintsSize() int64 {
	fi, err := t.fs.statState(hintsFile)
	if err != nil {
		return -1
	}
	return fi.Size()
}

func validScope(s Scope) ([]string, error) {
	for _, m := range s.Models {
		if err := datastore.ValidatePartition(m); err != nil {
			return nil, err
		}
	}
	return s.Models, nil
}

// isNotFound reports a missing or deleted remote path.
func isNotFound(err error) bool { return errors.Is(err, metastore.ErrNotFound) }

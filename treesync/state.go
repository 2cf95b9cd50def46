package treesync

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/metastore"
)

// StateDir is the directory of a tree's own state; it is never synced.
const StateDir = ".lake"

// stateVersion starts state.json. NB: must not change meaning.
const stateVersion = 1

// fileState is what a path was at its last sync.
type fileState struct {
	// Version and Pos are the remote version and its position.
	Version string `json:"version"`
	Pos     uint64 `json:"pos"`
	// Size, MTime (Unix nanoseconds; 0 means "hash to be sure") and SHA256
	// are the local file's, as written or read at that sync.
	Size   int64  `json:"size"`
	MTime  int64  `json:"mtime"`
	SHA256 string `json:"sha256"`
}

// state is DIR/.lake/state.json.
type state struct {
	Version int                  `json:"version"`
	Files   map[string]fileState `json:"files"`
	// Positions are the feed positions pulled, per partition.
	Positions map[string]uint64 `json:"positions"`
	// Cursor is the unscoped position (a ChangedPartitions cursor), valid
	// when Unscoped is set: only an unscoped pull sets it.
	Cursor   string `json:"cursor,omitempty"`
	Unscoped bool   `json:"unscoped,omitempty"`
	// Namespace is the namespace the tree syncs with. A state without one
	// was written before namespaces had their own index: its files are
	// the default namespace's.
	Namespace string `json:"namespace,omitempty"`
	// Catalog is the tree's position in the catalog (CatalogIncremental).
	Catalog catalog.Cursor `json:"catalog,omitzero"`
	// Reclaimed is when this tree last ran its namespace's lifecycle
	// Reclaim (Unix nanoseconds).
	Reclaimed int64 `json:"reclaimed,omitempty"`
	// Policy is the namespace's lifecycle policy as of this tree's last
	// completed catalog fold and lifecycle run; nil when the last sync's
	// did not complete (the next sync then takes the lock to do them).
	// A sync with nothing to push or pull ends without the lock only if
	// the policy is still this one.
	Policy *datastore.Lifecycle `json:"policy,omitempty"`
	// Skipped are the remote paths this tree could not write (a link, a
	// file or a directory in the way), with why; every sync retries them.
	Skipped map[string]string `json:"skipped,omitempty"`
	// FoldCursor is the catalog fold cursor this tree's last fold left
	// (catalog.FoldStats.Cursor), passed to the next fold so that it
	// need not read the cursor's record: only a guess, which the fold
	// checks against the record (catalog.FoldOptions.Cursor).
	FoldCursor string `json:"foldCursor,omitempty"`
	// FoldsUnrecorded counts this tree's folds since the cursor's record
	// was last written: a fold the sync's commit carries on S3 leaves the
	// record (a request of its own there), and every recordEvery-th sync
	// writes it (catalog.FoldOptions.CursorOptional).
	FoldsUnrecorded int `json:"foldsUnrecorded,omitempty"`
	// FoldRecorded is the cursor this tree last wrote to the record (or
	// its fold of its own did), which the next write expects
	// (catalog.RecordCursor).
	FoldRecorded string `json:"foldRecorded,omitempty"`
	// config is the namespace's configuration as this sync read it
	// (policy.go); never saved.
	config *datastore.NamespaceConfig
}

func (t *Tree) newState() *state {
	return &state{Version: stateVersion, Files: map[string]fileState{}, Positions: map[string]uint64{}, Namespace: t.opts.Namespace}
}

// The files of the state directory.
const (
	stateFile = "state.json"
	hintsFile = "dirty"
	lockFile  = "lock"
)

func (t *Tree) statePath() string { return filepath.Join(t.dir, StateDir, stateFile) }

func (t *Tree) loadState() (*state, error) {
	b, err := t.fs.readState(stateFile)
	if errors.Is(err, os.ErrNotExist) {
		return t.newState(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("lake: read sync state: %w", err)
	}
	s := t.newState()
	s.Namespace = ""
	if err := json.Unmarshal(b, s); err != nil || s.Version != stateVersion {
		return nil, fmt.Errorf("lake: sync state %s is damaged or from another version (remove it to sync from scratch): %v", t.statePath(), err)
	}
	if s.Files == nil {
		s.Files = map[string]fileState{}
	}
	if s.Positions == nil {
		s.Positions = map[string]uint64{}
	}
	synced := s.Namespace
	if synced == "" {
		synced = DefaultNamespace // before namespaces had an index of their own
	}
	if synced != t.opts.Namespace {
		return nil, fmt.Errorf("%w: %s was synced with namespace %s, not %s: sync it with --namespace %s, or sync another directory (each namespace has its own files)",
			metastore.ErrInvalidArgument, t.dir, synced, t.opts.Namespace, synced)
	}
	s.Namespace = t.opts.Namespace
	return s, nil
}

// saveState replaces state.json atomically.
func (t *Tree) saveState(s *state) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("lake: encode sync state: %w", err)
	}
	return t.fs.writeState(stateFile, b)
}

// maxHintLine bounds one line of the hints file; a longer one means the
// file is damaged.
const maxHintLine = datastore.MaxPathBytes + 1

// readHints returns the hinted paths, and false when there are none, when
// they overflowed MaxHints, or when the file is damaged (the walk decides
// then). A line that is not a plain tree path (a path the store refuses,
// or one under .lake) is ignored with a warning: the hints come from this
// tree's own MarkDirty, but the file is only as trustworthy as anything
// else in the directory.
func (t *Tree) readHints(warn *[]string) ([]string, bool, error) {
	f, err := t.fs.openState(hintsFile, os.O_RDONLY)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		*warn = append(*warn, fmt.Sprintf("the dirty hints %s/%s cannot be read (%v): walking the tree instead", StateDir, hintsFile, err))
		return nil, false, nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		*warn = append(*warn, fmt.Sprintf("the dirty hints %s/%s are not a regular file: walking the tree instead", StateDir, hintsFile))
		return nil, false, nil
	}
	seen := map[string]bool{}
	var out []string
	ignored := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4096), maxHintLine)
	for sc.Scan() {
		p := sc.Text()
		if p == "" || seen[p] {
			continue
		}
		if !utf8.ValidString(p) || strings.ContainsRune(p, 0) {
			*warn = append(*warn, fmt.Sprintf("the dirty hints %s/%s are damaged (a line that is not text): walking the tree instead", StateDir, hintsFile))
			return nil, false, nil
		}
		if err := checkLocalPath(p); err != nil {
			if ignored++; ignored <= 10 {
				*warn = append(*warn, fmt.Sprintf("dirty hint %q ignored: not a plain tree path", p))
			}
			continue
		}
		if len(seen) >= t.opts.MaxHints {
			return nil, false, nil
		}
		seen[p] = true
		out = append(out, p)
	}
	if ignored > 10 {
		*warn = append(*warn, fmt.Sprintf("%d more dirty hints ignored", ignored-10))
	}
	if err := sc.Err(); err != nil {
		*warn = append(*warn, fmt.Sprintf("the dirty hints %s/%s are damaged (%v): walking the tree instead", StateDir, hintsFile, err))
		return nil, false, nil
	}
	return out, true, nil
}

// lockDir takes the directory's file lock, so that two processes never
// sync one directory at once.
func (t *Tree) lockDir() (func(), error) {
	f, err := t.fs.openState(lockFile, os.O_CREATE|os.O_RDWR)
	if err != nil {
		return nil, fmt.Errorf("lake: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: another process is syncing %s", ErrBusy, t.dir)
	}
	return func() { f.Close() }, nil
}

// inScope reports whether p is in one of the scope's partitions.
func (t *Tree) inScope(models []string, p string) bool {
	if len(models) == 0 {
		return true
	}
	return slices.Contains(models, t.store.Partition(p))
}

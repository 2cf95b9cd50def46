package treesync

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

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
}

func (t *Tree) newState() *state {
	return &state{Version: stateVersion, Files: map[string]fileState{}, Positions: map[string]uint64{}, Namespace: t.opts.Namespace}
}

func (t *Tree) statePath() string { return filepath.Join(t.dir, StateDir, "state.json") }
func (t *Tree) hintsPath() string { return filepath.Join(t.dir, StateDir, "dirty") }

func (t *Tree) loadState() (*state, error) {
	b, err := os.ReadFile(t.statePath())
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
	return writeAtomic(filepath.Join(t.dir, StateDir), t.statePath(), b, 0o600)
}

// writeAtomic writes b to a temp file in tmpDir, fsyncs it and renames it to
// path, so a reader sees the old file or the new one, whole.
func writeAtomic(tmpDir, path string, b []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(tmpDir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("lake: write %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, mode)
	}
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o755)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("lake: write %s: %w", path, err)
	}
	return nil
}

// readHints returns the hinted paths, and false when there are none or they
// overflowed MaxHints (the walk decides then).
func (t *Tree) readHints() ([]string, bool, error) {
	f, err := os.Open(t.hintsPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("lake: read dirty hints: %w", err)
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		p := sc.Text()
		if p == "" || seen[p] {
			continue
		}
		if len(seen) >= t.opts.MaxHints {
			return nil, false, nil
		}
		seen[p] = true
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, false, nil // a damaged hints file: walk instead
	}
	return out, true, nil
}

// lockDir takes the directory's file lock, so that two processes never
// sync one directory at once.
func (t *Tree) lockDir() (func(), error) {
	if err := os.MkdirAll(filepath.Join(t.dir, StateDir), 0o755); err != nil {
		return nil, fmt.Errorf("lake: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(t.dir, StateDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lake: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: another process is syncing %s", ErrBusy, t.dir)
	}
	return func() { f.Close() }, nil
}

// localPath turns a tree path into a file name under dir.
func (t *Tree) localPath(p string) string { return filepath.Join(t.dir, filepath.FromSlash(p)) }

// inScope reports whether p is in one of the scope's partitions.
func inScope(models []string, p string) bool {
	if len(models) == 0 {
		return true
	}
	return slices.Contains(models, datastore.Partition(p))
}

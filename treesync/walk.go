package treesync

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// racyWindow: a file whose mtime is this close to the moment its state was
// recorded may change again within the same mtime tick, so its recorded
// mtime is 0 and the next walk hashes it.
const racyWindow = 2 * time.Second

// Kind says how a dirty path differs from its last sync.
type Kind string

// Kinds of local change.
const (
	Added    Kind = "added"
	Modified Kind = "modified"
	Deleted  Kind = "deleted"
)

// LocalChange is one dirty path.
type LocalChange struct {
	Path string
	Kind Kind
	// SHA256 is the local content's hash (empty for a delete, and for a
	// path whose content is only hashed by its upload).
	SHA256 string
}

// dirty finds the dirty paths in scope: the hints if there are any, else a
// walk. It never reads the remote.
func (t *Tree) dirty(st *state, models []string, useHints bool) ([]LocalChange, error) {
	if useHints {
		if _, ok, err := t.readHints(); err != nil {
			return nil, err
		} else if ok {
			return t.hinted(st, models)
		}
	}
	return t.walk(st, models)
}

// hinted returns the hinted paths in scope that are dirty; none without
// hints.
func (t *Tree) hinted(st *state, models []string) ([]LocalChange, error) {
	hints, ok, err := t.readHints()
	if err != nil || !ok {
		return nil, err
	}
	var out []LocalChange
	for _, p := range hints {
		if !inScope(models, p) {
			continue
		}
		c, changed, err := t.check(st, p)
		if err != nil {
			return nil, err
		}
		if changed {
			out = append(out, c)
		}
	}
	return out, nil
}

// check compares one path with its last-synced state.
func (t *Tree) check(st *state, p string) (LocalChange, bool, error) {
	if err := datastore.ValidatePath(p); err != nil {
		return LocalChange{}, false, err
	}
	prev, synced := st.Files[p]
	fi, err := os.Lstat(t.localPath(p))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return LocalChange{Path: p, Kind: Deleted}, synced, nil
	case err != nil:
		return LocalChange{}, false, fmt.Errorf("lake: %w", err)
	case !fi.Mode().IsRegular():
		return LocalChange{}, false, fmt.Errorf("%w: %s is not a regular file; a tree syncs regular files only", metastore.ErrInvalidArgument, p)
	case !synced:
		return LocalChange{Path: p, Kind: Added}, true, nil
	case fi.Size() == prev.Size && fi.ModTime().UnixNano() == prev.MTime && prev.MTime != 0:
		return LocalChange{}, false, nil
	}
	sum, err := hashFile(t.localPath(p))
	if err != nil {
		return LocalChange{}, false, err
	}
	if sum == prev.SHA256 {
		// Clean: remember the mtime once it is safely in the past, so the
		// next walk need not hash the file again.
		if fi.Size() == prev.Size && t.now().Sub(fi.ModTime()) >= racyWindow {
			prev.MTime = fi.ModTime().UnixNano()
			st.Files[p] = prev
		}
		return LocalChange{}, false, nil
	}
	return LocalChange{Path: p, Kind: Modified, SHA256: sum}, true, nil
}

// walk checks every file under the scope's directories and every synced
// path of the scope that is gone.
func (t *Tree) walk(st *state, models []string) ([]LocalChange, error) {
	roots := []string{t.dir}
	if len(models) > 0 {
		roots = roots[:0]
		for _, m := range models {
			roots = append(roots, t.localPath(datastore.PartitionPrefix(m)))
		}
	}
	seen := map[string]bool{}
	var out []LocalChange
	for _, root := range roots {
		err := filepath.WalkDir(root, func(name string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, os.ErrNotExist) && name == root {
					return filepath.SkipDir
				}
				return err
			}
			rel, _ := filepath.Rel(t.dir, name)
			if d.IsDir() {
				if rel == StateDir {
					return filepath.SkipDir
				}
				return nil
			}
			p := filepath.ToSlash(rel)
			if !inScope(models, p) {
				return nil
			}
			seen[p] = true
			c, changed, err := t.check(st, p)
			if err != nil {
				return err
			}
			if changed {
				out = append(out, c)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("lake: walk %s: %w", t.dir, err)
		}
	}
	for p := range st.Files {
		if !seen[p] && inScope(models, p) {
			if _, err := os.Lstat(t.localPath(p)); errors.Is(err, os.ErrNotExist) {
				out = append(out, LocalChange{Path: p, Kind: Deleted})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func hashFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", fmt.Errorf("lake: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("lake: read %s: %w", name, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// recordWritten returns the state of a file pull just wrote.
func recordWritten(name string, info datastore.Info, now time.Time) (fileState, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return fileState{}, fmt.Errorf("lake: %w", err)
	}
	return record(fi, info, now), nil
}

// record returns the state of a file from fi, taken before its content was
// read (an upload) or after it was written (a pull): a change after fi
// moves the mtime, and the next walk sees it.
func record(fi os.FileInfo, info datastore.Info, now time.Time) fileState {
	fs := fileState{Version: info.Version, Pos: info.Pos, Size: fi.Size(), MTime: fi.ModTime().UnixNano(), SHA256: info.SHA256}
	if now.Sub(fi.ModTime()) < racyWindow || fi.Size() != info.Size {
		fs.MTime = 0
	}
	return fs
}

package treesync

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/lakemeta/lake/datastore"
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
// walk (useHints false: the hints only). It never reads the remote.
func (t *Tree) dirty(st *state, models []string, walk bool, sk *skips, warn *[]string) ([]LocalChange, error) {
	hints, ok, err := t.readHints(warn)
	if err != nil {
		return nil, err
	}
	if !ok && walk {
		return t.walk(st, models, sk)
	}
	var out []LocalChange
	for _, p := range hints {
		if !t.inScope(models, p) {
			continue
		}
		c, changed, err := t.check(st, p)
		if sk.entry(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if changed {
			out = append(out, c)
		}
	}
	return out, nil
}

// check compares one path with its last-synced state. A path that cannot
// be synced (a link at it or above it, a directory where a file was
// synced, a name the store refuses) is an *entryError.
func (t *Tree) check(st *state, p string) (LocalChange, bool, error) {
	if err := checkLocalPath(p); err != nil {
		return LocalChange{}, false, err
	}
	prev, synced := st.Files[p]
	fi, err := t.fs.lstat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return LocalChange{Path: p, Kind: Deleted}, synced, nil
	case err != nil:
		return LocalChange{}, false, err
	case fi.IsDir() && synced:
		return LocalChange{}, false, &entryError{path: p, why: "was synced as a file but is a directory in the tree now: a path is a file or a directory, never both (put the file back, or remove it with `lake data rm` and sync, then create the directory)"}
	case fi.IsDir():
		return LocalChange{Path: p, Kind: Deleted}, false, nil
	case !fi.Mode().IsRegular():
		return LocalChange{}, false, &entryError{path: p, why: "is not a regular file; a tree syncs regular files only"}
	case !synced:
		return LocalChange{Path: p, Kind: Added}, true, nil
	case fi.Size() == prev.Size && fi.ModTime().UnixNano() == prev.MTime && prev.MTime != 0:
		return LocalChange{}, false, nil
	}
	sum, err := t.fs.hash(p)
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
// path of the scope that is gone. It follows no link: a link is skipped,
// named.
func (t *Tree) walk(st *state, models []string, sk *skips) ([]LocalChange, error) {
	roots := []string{"."}
	if len(models) > 0 {
		roots = roots[:0]
		for _, m := range models {
			roots = append(roots, strings.TrimSuffix(datastore.PartitionPrefix(m), "/"))
		}
	}
	seen := map[string]bool{}
	var out []LocalChange
	for _, root := range roots {
		err := t.fs.walk(root, func(p string, d fs.DirEntry) error {
			if !t.inScope(models, p) {
				return nil
			}
			seen[p] = true
			if d.Type()&fs.ModeSymlink != 0 {
				sk.entry(symlinkError(p, p))
				return nil
			}
			c, changed, err := t.check(st, p)
			if sk.entry(err) {
				return nil
			}
			if err != nil {
				return err
			}
			if changed {
				out = append(out, c)
			}
			return nil
		})
		if sk.entry(err) {
			continue // a link on the way to a scoped directory
		}
		if err != nil {
			return nil, fmt.Errorf("lake: walk %s: %w", t.dir, err)
		}
	}
	for p := range st.Files {
		if !seen[p] && t.inScope(models, p) {
			c, changed, err := t.check(st, p)
			if sk.entry(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if changed && c.Kind == Deleted {
				out = append(out, c)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
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

package treesync

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"

	"github.com/lakemeta/lake/metastore"
)

// treeFS is the tree's only access to the file system. Every read, write,
// rename and delete of the working tree and of its state directory goes
// through one os.Root opened on the tree's directory, so no name resolves
// outside it (a ".." or a symbolic link that leaves the tree fails in the
// kernel's openat walk), whatever a path from the store or the hints says.
//
// On top of the root, treeFS follows no symbolic link at all, inside the
// tree either: a tree path whose leaf or any directory above it is a link
// is refused with an *entryError naming the link (the sync skips that path
// and syncs the rest). A link swapped in by another process between the
// check and the operation can at worst redirect the operation inside the
// tree, never outside it: the root still holds.
//
// Paths are tree paths (slash-separated, relative, already checked by
// datastore.ValidatePath); the state directory's files are named by their
// base name.
type treeFS struct {
	root *os.Root
	dir  string // the directory's absolute name, for messages only
}

func openTreeFS(dir string) (*treeFS, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("lake: open the tree %s: %w", dir, err)
	}
	return &treeFS{root: r, dir: dir}, nil
}

func (f *treeFS) close() error { return f.root.Close() }

// entryError is a problem with one path only: the sync skips the path,
// names it with the reason and the way out, and syncs everything else. On
// its own (MarkDirty, a single-path call) it is an invalid argument.
type entryError struct {
	path string
	why  string
	// fileInWay: a file of the tree sits where a directory of path
	// should be (so nothing of the tree is at path).
	fileInWay bool
}

func (e *entryError) Error() string { return fmt.Sprintf("lake: %s: %s", e.path, e.why) }

// Unwrap makes an entryError match metastore.ErrInvalidArgument.
func (e *entryError) Unwrap() error { return metastore.ErrInvalidArgument }

func symlinkError(p, link string) error {
	why := fmt.Sprintf("%s is a symbolic link; a tree syncs regular files in real directories and never follows a link (replace the link with the file or directory itself)", link)
	if link == p {
		why = "is a symbolic link; a tree syncs regular files only and never follows a link (replace it with the file itself, or move it out of the tree)"
	}
	return &entryError{path: p, why: why}
}

// clashLocalFile: the store has p, but a file of the tree sits where one of
// p's directories should be.
func clashLocalFile(p, file string) error {
	return &entryError{path: p, fileInWay: true, why: fmt.Sprintf("the store has it, but %s is a file in the tree, not a directory: a path is a file or a directory, never both (if %s is yours, rename or remove it and sync; if the store holds both, remove one there with lake data rm)", file, file)}
}

// clashLocalDir: the store has the file p, but p is a directory here.
func clashLocalDir(p string) error {
	return &entryError{path: p, why: "the store has it as a file, but it is a directory in the tree: a path is a file or a directory, never both (rename or remove the local directory, then sync)"}
}

// checkParents returns nil if every directory above p is a real directory
// or absent; a link or a file in the way is an *entryError.
func (f *treeFS) checkParents(p string) error {
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		dir := p[:i]
		fi, err := f.root.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return fmt.Errorf("lake: %w", err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return symlinkError(p, dir)
		case !fi.IsDir():
			return clashLocalFile(p, dir)
		}
	}
	return nil
}

// lstat returns the tree file p's information without following a link;
// a link at p or above it is an *entryError, a missing p (or one below a
// file) fs.ErrNotExist.
func (f *treeFS) lstat(p string) (fs.FileInfo, error) {
	if err := f.checkParents(p); err != nil {
		var ee *entryError
		if errors.As(err, &ee) && ee.fileInWay {
			return nil, fs.ErrNotExist // below a file: nothing there
		}
		return nil, err
	}
	fi, err := f.root.Lstat(p)
	if errors.Is(err, syscall.ENOTDIR) {
		return nil, fs.ErrNotExist
	}
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, symlinkError(p, p)
	}
	return fi, nil
}

// open opens the regular tree file p for reading, never through a link.
func (f *treeFS) open(p string) (*os.File, error) {
	if err := f.checkParents(p); err != nil {
		return nil, err
	}
	// O_NOFOLLOW: a link put at p since the check fails here instead of
	// being read; O_NONBLOCK: a FIFO put there does not hang the open (it
	// is then refused as not a regular file).
	file, err := f.root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, symlinkError(p, p)
	}
	if err != nil {
		return nil, fmt.Errorf("lake: %w", err)
	}
	fi, err := file.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = &entryError{path: p, why: "is not a regular file; a tree syncs regular files only"}
	}
	if err != nil {
		file.Close()
		return nil, err
	}
	return file, nil
}

// hash returns the SHA-256 of the tree file p.
func (f *treeFS) hash(p string) (string, error) {
	file, err := f.open(p)
	if err != nil {
		return "", err
	}
	defer file.Close()
	h := sha256.New()
	if _, err := io.Copy(h, file); err != nil {
		return "", fmt.Errorf("lake: read %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeFrom replaces the tree file p atomically with what fill streams
// into a temp file in the state directory (fsync, rename), in constant
// memory whatever the size (issue 26), creating its directories, and
// returns the written file's information. A link or a file where a
// directory of p should be, or a directory at p, is an *entryError and
// nothing is written; an error of fill is returned as it is, and p is left
// untouched.
func (f *treeFS) writeFrom(p string, fill func(io.Writer) error) (fs.FileInfo, error) {
	if err := f.canWrite(p); err != nil {
		return nil, err
	}
	if dir := path.Dir(p); dir != "." {
		if err := f.root.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("lake: create the directory of %s: %w", p, err)
		}
		// MkdirAll follows links: check again that it found none.
		if err := f.checkParents(p); err != nil {
			return nil, err
		}
	}
	if err := f.writeAtomicFrom(p, 0o644, fill); err != nil {
		return nil, err
	}
	return f.root.Lstat(p)
}

// canWrite returns the *entryError that write would return for p without
// writing anything, nil if it would write (as far as a look can tell).
func (f *treeFS) canWrite(p string) error {
	if err := f.checkParents(p); err != nil {
		return err
	}
	if fi, err := f.root.Lstat(p); err == nil {
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return symlinkError(p, p)
		case fi.IsDir():
			return clashLocalDir(p)
		}
	}
	return nil
}

// remove deletes the tree file p (absent is fine) and the directories its
// removal left empty, up to the tree's root, so that a tree whose models
// come and go does not keep empty directories for its walk to visit.
func (f *treeFS) remove(p string) error {
	fi, err := f.lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return clashLocalDir(p)
	}
	if err := f.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("lake: %w", err)
	}
	for dir := path.Dir(p); dir != "." && dir != StateDir; dir = path.Dir(dir) {
		if f.root.Remove(dir) != nil { // not empty, or gone
			break
		}
	}
	return nil
}

// walk calls fn for every entry below the tree directory dir ("." for the
// whole tree) that is not a directory, in lexical order, skipping the
// state directory; it follows no link (a link is passed to fn as it is).
// A missing dir walks nothing.
func (f *treeFS) walk(dir string, fn func(p string, d fs.DirEntry) error) error {
	if dir != "." {
		if fi, err := f.lstat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil
		} else if err != nil {
			return err
		} else if !fi.IsDir() {
			return nil
		}
	}
	return fs.WalkDir(f.root.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == StateDir {
				return fs.SkipDir
			}
			return nil
		}
		return fn(p, d)
	})
}

// The state directory.

// stateDir makes sure the state directory is a real directory of the tree
// (never a link: the tree's state is never written through one).
func (f *treeFS) stateDir() error {
	fi, err := f.root.Lstat(StateDir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := f.root.Mkdir(StateDir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("lake: create %s: %w", StateDir, err)
		}
		fi, err = f.root.Lstat(StateDir)
	}
	if err != nil {
		return fmt.Errorf("lake: %w", err)
	}
	if !fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%w: %s/%s is not a directory (a link or a file): the tree's state is kept only in a real directory; remove it", metastore.ErrInvalidArgument, f.dir, StateDir)
	}
	return nil
}

// readState returns the state file name's content, fs.ErrNotExist if it
// has none.
func (f *treeFS) readState(name string) ([]byte, error) {
	if err := f.stateDir(); err != nil {
		return nil, err
	}
	file, err := f.root.OpenFile(StateDir+"/"+name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	return io.ReadAll(file)
}

// openState opens the state file name with flag (O_NOFOLLOW added).
func (f *treeFS) openState(name string, flag int) (*os.File, error) {
	if err := f.stateDir(); err != nil {
		return nil, err
	}
	return f.root.OpenFile(StateDir+"/"+name, flag|syscall.O_NOFOLLOW, 0o600)
}

// statState returns the state file name's information.
func (f *treeFS) statState(name string) (fs.FileInfo, error) {
	return f.root.Lstat(StateDir + "/" + name)
}

// removeState removes the state file name.
func (f *treeFS) removeState(name string) error {
	return f.root.Remove(StateDir + "/" + name)
}

// writeState replaces the state file name with b atomically.
func (f *treeFS) writeState(name string, b []byte) error {
	if err := f.stateDir(); err != nil {
		return err
	}
	return f.writeAtomic(StateDir+"/"+name, b, 0o600)
}

// writeAtomic writes b to a temp file in the state directory, fsyncs it
// and renames it to p, so a reader sees the old file or the new one,
// whole.
func (f *treeFS) writeAtomic(p string, b []byte, mode os.FileMode) error {
	return f.writeAtomicFrom(p, mode, func(w io.Writer) error { _, err := w.Write(b); return err })
}

// writeAtomicFrom is writeAtomic with the content streamed by fill; an
// error of fill is returned unwrapped (it is the source's, not the
// tree's).
func (f *treeFS) writeAtomicFrom(p string, mode os.FileMode, fill func(io.Writer) error) error {
	if err := f.stateDir(); err != nil {
		return err
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := StateDir + "/.tmp-" + hex.EncodeToString(rnd[:])
	file, err := f.root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return fmt.Errorf("lake: write %s: %w", p, err)
	}
	if err := fill(file); err != nil {
		file.Close()
		f.root.Remove(tmp)
		return err
	}
	err = file.Chmod(mode) // exact, whatever the umask
	if err == nil {
		err = file.Sync()
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = f.root.Rename(tmp, p)
	}
	if err != nil {
		f.root.Remove(tmp)
		return fmt.Errorf("lake: write %s: %w", p, err)
	}
	return nil
}

// readSmallState returns the state file name's content if it is a regular
// file of at most max bytes: a cache a tree keeps between syncs
// (lockrecord, heads), ignored when damaged, linked or oversized.
func (f *treeFS) readSmallState(name string, max int64) ([]byte, bool) {
	if fi, err := f.statState(name); err != nil || !fi.Mode().IsRegular() || fi.Size() > max {
		return nil, false
	}
	b, err := f.readState(name)
	return b, err == nil
}

// keepState writes b as the state file name unless it holds b already: a
// cache, whose failure costs the next sync what it would save, so it is not
// reported.
func (f *treeFS) keepState(name string, b []byte) {
	if old, err := f.readState(name); err == nil && bytes.Equal(old, b) {
		return
	}
	_ = f.writeState(name, b)
}

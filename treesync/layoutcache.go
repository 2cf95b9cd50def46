package treesync

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"

	"github.com/lakemeta/lake/datastore"
)

// layoutFile remembers, in the state directory, the layout the datastore
// recorded when this tree last read it (datastore.OpenOptions.Remembered).
const layoutFile = "layout"

// RememberedLayout returns the datastore layout the tree of dir remembers
// from its last sync, or nil if it remembers none (or its file is not one
// this lake wrote). Open the datastore with it
// (datastore.OpenOptions.Remembered) for a sync that may prove it has
// nothing to do without reading the layout record: Sync reads the record
// before it writes pulled changes into the tree or saves its state
// (Store.VerifyLayout), or proves it in its commit (layoutcommit.go), and a
// layout that is no longer the datastore's makes Sync return an error matching
// datastore.ErrStaleLayout, having forgotten it: open the datastore again
// without it and sync again. docs/sync.md says why it cannot be wrong.
func RememberedLayout(dir string) *datastore.Layout {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil
	}
	defer root.Close()
	f, err := root.OpenFile(StateDir+"/"+layoutFile, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, 64)
	n, _ := f.Read(b)
	l, err := datastore.ParseLayout(strings.TrimSpace(string(b[:n])))
	if err != nil {
		return nil
	}
	return &l
}

// verifyLayout makes sure the store's layout is the datastore's before the
// sync computes a partition from a path (datastore.Store.VerifyLayout: no
// request unless the store was opened with a remembered layout), then
// remembers it for the next sync; a stale one is forgotten.
func (t *Tree) verifyLayout(ctx context.Context) error {
	err := t.root.VerifyLayout(ctx)
	if errors.Is(err, datastore.ErrStaleLayout) {
		_ = t.fs.removeState(layoutFile)
		return err
	}
	if err != nil {
		return err
	}
	t.rememberLayout()
	return nil
}

// rememberLayout writes the layout file if the store's layout is verified
// and the file does not hold it already. A failure costs the next sync one
// request, no more: it is not reported.
func (t *Tree) rememberLayout() {
	if !t.root.LayoutVerified() {
		return
	}
	want := t.root.Layout().String()
	if b, err := t.fs.readState(layoutFile); err == nil && string(b) == want {
		return
	}
	_ = t.fs.writeState(layoutFile, []byte(want))
}

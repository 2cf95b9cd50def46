package treesync

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lakemeta/lake/datastore"
)

// download streams the latest version of remote path p into the local file
// name, atomically (a temp file in tmpDir, synced, then renamed), in
// constant memory: datastore.Store.GetTo writes one chunk at a time and
// checks size and SHA-256 as it goes (issue 26). On any error, a damaged
// file (datastore.ErrDamaged) or a missing path included, the temp file is
// removed and name is untouched; the error is GetTo's, unwrapped.
func download(ctx context.Context, s *datastore.Store, p, tmpDir, name string, mode os.FileMode) (datastore.Info, error) {
	f, err := os.CreateTemp(tmpDir, ".tmp-*")
	if err != nil {
		return datastore.Info{}, fmt.Errorf("lake: write %s: %w", name, err)
	}
	tmp := f.Name()
	info, err := s.GetTo(ctx, p, f)
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return datastore.Info{}, err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, mode)
	}
	if err == nil {
		err = os.MkdirAll(filepath.Dir(name), 0o755)
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
		return datastore.Info{}, fmt.Errorf("lake: write %s: %w", name, err)
	}
	return info, nil
}

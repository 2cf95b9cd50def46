package syncload

import (
	"context"
	"fmt"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/treesync"
)

// CatalogMode is how each sync reads the catalog: the index of everything
// the datastore holds across namespaces (the seed's "export, required on
// every sync for cross-namespace visibility").
type CatalogMode string

// The catalog modes.
const (
	// CatalogExport reads the whole catalog (every model of every
	// namespace) on every sync, the seed's export: its cost grows with
	// everything the catalog holds, deleted models included while the
	// lifecycle is off (treesync.CatalogExport).
	CatalogExport CatalogMode = "export"
	// CatalogIncremental reads only the catalog's changes since the
	// worker's last sync (treesync.CatalogIncremental, the default of
	// lake data sync).
	CatalogIncremental CatalogMode = "incremental"
	// CatalogNone neither reads nor maintains the catalog
	// (treesync.CatalogOff).
	CatalogNone CatalogMode = "none"
)

// CatalogStep is a catalog mode as a worker applies it: the tree's own
// catalog handling (package treesync, issue 19's catalog: folded by each
// commit; read whole on every sync, or only its changes), and the size of
// the worker's view of it after each sync, for the series.
type CatalogStep interface {
	// TreeMode is the tree's catalog mode.
	TreeMode() treesync.CatalogMode
	// Read returns the rows of the worker's view of the catalog (every
	// model of every namespace), as its last sync left them. It reads only
	// the tree's local mirror: what reading the catalog cost the store is
	// in the sync's pull.
	Read(ctx context.Context, tr *treesync.Tree) (rows int, err error)
}

// newCatalogStep is the one place a catalog mode becomes a step.
func newCatalogStep(m CatalogMode) (CatalogStep, error) {
	switch m {
	case CatalogExport:
		return treeCatalog{treesync.CatalogExport}, nil
	case CatalogIncremental:
		return treeCatalog{treesync.CatalogIncremental}, nil
	case CatalogNone:
		return treeCatalog{treesync.CatalogOff}, nil
	}
	return nil, fmt.Errorf("%w: catalog %q: want export, incremental or none", metastore.ErrInvalidArgument, m)
}

type treeCatalog struct{ mode treesync.CatalogMode }

func (c treeCatalog) TreeMode() treesync.CatalogMode { return c.mode }

func (c treeCatalog) Read(_ context.Context, tr *treesync.Tree) (int, error) {
	if c.mode == treesync.CatalogOff {
		return 0, nil
	}
	rows, err := tr.Catalog()
	return len(rows), err
}

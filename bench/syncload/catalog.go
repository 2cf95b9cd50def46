package syncload

import (
	"context"
	"fmt"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// CatalogMode is how each sync reads the catalog: the index of everything
// the datastore holds across namespaces (the seed's "export, required on
// every sync for cross-namespace visibility").
type CatalogMode string

// The catalog modes.
const (
	// CatalogExport reads the whole listing of every live file of the
	// datastore on every sync: its cost grows with everything the catalog
	// holds, deleted models' data included while the lifecycle is off.
	CatalogExport CatalogMode = "export"
	// CatalogIncremental reads only what changed since the worker's last
	// read and keeps the catalog in memory. Today it is built on the
	// datastore's change feed (ChangedPartitions, then Changes of each);
	// issue 19's catalog replaces it in newCatalogStep.
	CatalogIncremental CatalogMode = "incremental"
	// CatalogNone reads no catalog.
	CatalogNone CatalogMode = "none"
)

// CatalogStep runs once per sync, under the sync's lock, before the work.
// A worker has its own step (it may keep state between syncs) and calls it
// from one goroutine.
type CatalogStep interface {
	// Read brings the worker's view of the catalog up to date and returns
	// its rows (live files).
	Read(ctx context.Context, s *datastore.Store) (rows int, err error)
}

// newCatalogStep is the one place a catalog mode becomes a step.
//
// HOOK (issue 19): when the catalog across namespaces exists, make
// CatalogIncremental return a step that reads it incrementally through its
// API (and keep the feed-based step under another name if still useful).
func newCatalogStep(m CatalogMode) (CatalogStep, error) {
	switch m {
	case CatalogExport:
		return catalogExport{}, nil
	case CatalogIncremental:
		return &catalogFeed{pos: map[string]uint64{}, live: map[string]bool{}}, nil
	case CatalogNone:
		return catalogNone{}, nil
	}
	return nil, fmt.Errorf("%w: catalog %q: want export, incremental or none", metastore.ErrInvalidArgument, m)
}

type catalogNone struct{}

func (catalogNone) Read(context.Context, *datastore.Store) (int, error) { return 0, nil }

// catalogExport lists everything, every time.
type catalogExport struct{}

func (catalogExport) Read(ctx context.Context, s *datastore.Store) (int, error) {
	n, cur := 0, ""
	for {
		p, err := s.List(ctx, "", 1000, cur)
		if err != nil {
			return 0, fmt.Errorf("lake: catalog export: %w", err)
		}
		n += len(p.Files)
		if p.Cursor == "" {
			return n, nil
		}
		cur = p.Cursor
	}
}

// catalogFeed keeps the live paths of every partition, reading only the
// partitions that changed since its cursor and, in each, only the changes
// after its position.
type catalogFeed struct {
	cursor string
	pos    map[string]uint64
	live   map[string]bool
}

func (c *catalogFeed) Read(ctx context.Context, s *datastore.Store) (int, error) {
	heads, next, err := s.ChangedPartitions(ctx, c.cursor)
	if err != nil {
		return 0, fmt.Errorf("lake: catalog read: %w", err)
	}
	for _, h := range heads {
		for c.pos[h.Partition] < h.Seq {
			ch, upTo, err := s.Changes(ctx, h.Partition, c.pos[h.Partition], 1000)
			if err != nil {
				return 0, fmt.Errorf("lake: catalog read %s: %w", h.Partition, err)
			}
			for _, i := range ch {
				if i.Deleted {
					delete(c.live, i.Path)
				} else {
					c.live[i.Path] = true
				}
			}
			if upTo <= c.pos[h.Partition] {
				break
			}
			c.pos[h.Partition] = upTo
		}
	}
	c.cursor = next
	return len(c.live), nil
}

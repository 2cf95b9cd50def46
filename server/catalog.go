package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// maxCatalogRestarts bounds how often one refresh restarts its drain after
// metastore.ErrCursorExpired (a layout change under the drain).
const maxCatalogRestarts = 3

// catalog is the node's in-memory copy of one prefix (the table catalog,
// tbl/ by default). Readers get the last good copy; a failed refresh keeps
// it and records the error, so readers keep working while the store
// misbehaves and can see how stale their copy is.
type catalog struct {
	store    *metastore.Store
	prefix   string
	pageSize int

	mu          sync.RWMutex
	items       []metastore.Item // sorted by key; never modified in place
	loaded      bool
	refreshedAt time.Time
	lastErr     error
	lastErrAt   time.Time
}

// snapshot is a consistent read of the catalog's state.
type snapshot struct {
	items       []metastore.Item
	loaded      bool
	refreshedAt time.Time
	lastErr     error
	lastErrAt   time.Time
}

func (c *catalog) snapshot() snapshot {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return snapshot{c.items, c.loaded, c.refreshedAt, c.lastErr, c.lastErrAt}
}

// refresh drains the prefix through the store's paged List and, only if the
// whole drain succeeded, replaces the copy. It does no backend work beyond
// the List pages it drains (no point reads, no second pass); an expired
// cursor restarts the drain, a bounded number of times. It returns the
// number of pages read and the error, if any.
func (c *catalog) refresh(ctx context.Context) (pages int, err error) {
	var items []metastore.Item
	for attempt := 0; ; attempt++ {
		var n int
		items, n, err = c.drain(ctx)
		pages += n
		if errors.Is(err, metastore.ErrCursorExpired) && attempt < maxCatalogRestarts {
			continue
		}
		break
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.lastErr, c.lastErrAt = err, now
		return pages, err
	}
	c.items, c.loaded, c.refreshedAt, c.lastErr, c.lastErrAt = items, true, now, nil, time.Time{}
	return pages, nil
}

func (c *catalog) drain(ctx context.Context) ([]metastore.Item, int, error) {
	var all []metastore.Item
	cur := ""
	for pages := 1; ; pages++ {
		page, err := c.store.List(ctx, c.prefix, c.pageSize, cur)
		if err != nil {
			return nil, pages, fmt.Errorf("lake: catalog refresh of %q, page %d: %w", c.prefix, pages, err)
		}
		all = append(all, page.Items...)
		if page.Cursor == "" {
			slices.SortFunc(all, func(a, b metastore.Item) int { return strings.Compare(a.Key, b.Key) })
			// A key re-inserted behind the drain position by a concurrent
			// write can appear twice; one copy is enough (as in ListAll).
			all = slices.CompactFunc(all, func(a, b metastore.Item) bool { return a.Key == b.Key })
			return all, pages, nil
		}
		cur = page.Cursor
	}
}

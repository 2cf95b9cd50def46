package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// DefaultCatalogMaxBytes bounds the catalog copy when Options do not say:
// the keys and values of the catalog prefix may hold at most 32 MiB. A
// refresh that finds more fails (and keeps the last good copy), so the
// node's memory stays bounded however large the prefix grows; while a
// refresh runs the node holds at most two copies.
const DefaultCatalogMaxBytes = 32 << 20

// catalog is the node's in-memory copy of one prefix (the table catalog,
// tbl/ by default). Readers get the last good copy; a failed refresh keeps
// it and records the error, so readers keep working while the store
// misbehaves and can see how stale their copy is.
type catalog struct {
	store    *metastore.Store
	prefix   string
	pageSize int
	maxBytes int64

	mu          sync.RWMutex
	items       []metastore.Item // sorted by key; never modified in place
	bytes       int64            // keys and values of items
	loaded      bool
	refreshedAt time.Time
	lastErr     error
	lastErrAt   time.Time
}

// snapshot is a consistent read of the catalog's state.
type snapshot struct {
	items       []metastore.Item
	bytes       int64
	loaded      bool
	refreshedAt time.Time
	lastErr     error
	lastErrAt   time.Time
}

func (c *catalog) snapshot() snapshot {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return snapshot{c.items, c.bytes, c.loaded, c.refreshedAt, c.lastErr, c.lastErrAt}
}

// refresh drains the prefix (metastore.Store.Drain, the same drain as
// ListAll, bounded by maxBytes) and, only if the whole drain succeeded,
// replaces the copy. It does no backend work beyond the List pages it
// drains (no point reads, no second pass); an expired cursor restarts the
// drain, a bounded number of times. It returns the number of pages read and
// the error, if any.
func (c *catalog) refresh(ctx context.Context) (pages int, err error) {
	items, pages, err := c.store.Drain(ctx, c.prefix, &metastore.DrainOptions{PageSize: c.pageSize, MaxBytes: c.maxBytes})
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("lake: catalog refresh of %q (%d pages): %w", c.prefix, pages, err)
		c.lastErr, c.lastErrAt = err, now
		return pages, err
	}
	var size int64
	for _, it := range items {
		size += int64(metastore.ItemBytes(it.Key, it.Value))
	}
	c.items, c.bytes, c.loaded, c.refreshedAt, c.lastErr, c.lastErrAt = items, size, true, now, nil, time.Time{}
	return pages, nil
}

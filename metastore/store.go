package metastore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/lakemeta/lake/metastore/internal/cursor"
)

// Store is the portable metadata store that users see. It validates every
// argument once, here, then calls its Driver; it is safe for concurrent use
// when its Driver is.
type Store struct {
	d      Driver
	closed atomic.Bool
}

// New returns a Store over d.
func New(d Driver) *Store { return &Store{d: d} }

// Driver returns the backend under s, for backend-specific abilities (such as
// cost counters) that are not part of the contract.
func (s *Store) Driver() Driver { return s.d }

// Get returns the value of key, strongly consistent. A missing key gives an
// error matching ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := s.check(key); err != nil {
		return nil, err
	}
	return s.d.Get(ctx, key)
}

// Put writes value under key unconditionally.
func (s *Store) Put(ctx context.Context, key string, value []byte) error {
	if err := s.check(key); err != nil {
		return err
	}
	if err := ValidateValue(value); err != nil {
		return err
	}
	return s.d.Put(ctx, key, nonNil(value))
}

// CAS writes value under key only if the key's current state satisfies
// expect (ExpectAbsent creates). A mismatch gives an error matching
// ErrConflict.
func (s *Store) CAS(ctx context.Context, key string, expect Expect, value []byte) error {
	if err := s.check(key); err != nil {
		return err
	}
	if err := validateExpect(expect); err != nil {
		return err
	}
	if err := ValidateValue(value); err != nil {
		return err
	}
	return s.d.CAS(ctx, key, expect, nonNil(value))
}

// GuardedMutate atomically checks that guard.Key holds exactly guard.Value
// and target.Key satisfies target.Expect, then gives target.Key its new
// value or deletes it. A failed check gives an error matching ErrConflict. A
// guard that is its own target is refused with ErrInvalidArgument on every
// backend (DynamoDB forbids two actions on one item in a transaction).
func (s *Store) GuardedMutate(ctx context.Context, guard Guard, target Mutation) error {
	if err := s.check(guard.Key); err != nil {
		return fmt.Errorf("guard: %w", err)
	}
	if err := ValidateKey(target.Key); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	if guard.Key == target.Key {
		return fmt.Errorf("%w: guard and target are the same key %q", ErrInvalidArgument, guard.Key)
	}
	if err := ValidateValue(guard.Value); err != nil {
		return fmt.Errorf("guard: %w", err)
	}
	if err := validateExpect(target.Expect); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	if target.Delete {
		if target.Expect.Absent() {
			return fmt.Errorf("%w: a delete must expect a value", ErrInvalidArgument)
		}
		if target.Value != nil {
			return fmt.Errorf("%w: a delete takes no new value", ErrInvalidArgument)
		}
	} else if err := ValidateValue(target.Value); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	guard.Value = nonNil(guard.Value)
	if !target.Delete {
		target.Value = nonNil(target.Value)
	}
	return s.d.GuardedMutate(ctx, guard, target)
}

// Delete removes key only if it holds exactly expected. A different value,
// or a missing key, gives an error matching ErrConflict.
func (s *Store) Delete(ctx context.Context, key string, expected []byte) error {
	if err := s.check(key); err != nil {
		return err
	}
	if err := ValidateValue(expected); err != nil {
		return err
	}
	return s.d.Delete(ctx, key, nonNil(expected))
}

// List returns one page of the items whose keys start with prefix: at most
// limit items (1 to MaxListLimit), each backend request evaluating at most
// limit items, and at most MaxPageBytes of keys and values unless the page
// holds a single item: a page may end early at that byte budget, on every
// backend. Pass the returned cursor to continue; an empty cursor means the
// listing is complete. A page may be empty with a non-empty cursor: loop until
// the cursor is empty. Drained without concurrent writes, the pages hold every
// matching key exactly once, in the backend's order.
func (s *Store) List(ctx context.Context, prefix string, limit int, cur string) (Page, error) {
	if s.closed.Load() {
		return Page{}, ErrClosed
	}
	if err := ValidatePrefix(prefix); err != nil {
		return Page{}, err
	}
	if limit < 1 || limit > MaxListLimit {
		return Page{}, fmt.Errorf("%w: page limit %d is outside 1..%d", ErrInvalidArgument, limit, MaxListLimit)
	}
	var pos []byte
	if cur != "" {
		c, err := cursor.Decode(cur)
		if err != nil {
			return Page{}, fmt.Errorf("%w: %v", ErrInvalidCursor, err)
		}
		if c.Backend != s.d.Name() {
			return Page{}, fmt.Errorf("%w: issued by backend %q, not %q", ErrInvalidCursor, c.Backend, s.d.Name())
		}
		if c.Prefix != prefix {
			return Page{}, fmt.Errorf("%w: issued for prefix %q, not %q", ErrInvalidCursor, c.Prefix, prefix)
		}
		pos = c.Pos
	}
	items, next, err := s.d.List(ctx, prefix, limit, pos)
	if err != nil {
		return Page{}, err
	}
	if len(items) > limit {
		return Page{}, fmt.Errorf("lake: backend %s returned %d items for a page limit of %d", s.d.Name(), len(items), limit)
	}
	used := 0
	for i, it := range items {
		if PageFull(i, used, ItemBytes(it.Key, it.Value)) {
			return Page{}, fmt.Errorf("lake: backend %s returned a page over the %d-byte budget", s.d.Name(), MaxPageBytes)
		}
		used += ItemBytes(it.Key, it.Value)
		// A backend that returned a foreign or control key is broken; say
		// so rather than leak lake's own records or another prefix's keys.
		if !strings.HasPrefix(it.Key, prefix) || IsControlKey(it.Key) {
			return Page{}, fmt.Errorf("lake: backend %s returned key %q outside prefix %q", s.d.Name(), it.Key, prefix)
		}
	}
	page := Page{Items: items}
	if next != nil {
		page.Cursor = cursor.Cursor{Backend: s.d.Name(), Prefix: prefix, Pos: next}.Encode()
	}
	return page, nil
}

// maxDrainRestarts bounds how often a drain restarts after its cursor
// expired (a layout change during the drain).
const maxDrainRestarts = 3

// ListAll drains List for prefix and returns every matching item, sorted by
// key. If the layout changes during the drain (ErrCursorExpired) it restarts
// from the beginning, a bounded number of times.
func (s *Store) ListAll(ctx context.Context, prefix string) ([]Item, error) {
	items, _, err := s.Drain(ctx, prefix, nil)
	return items, err
}

// DrainOptions shape Drain. The zero value (or nil) drains in pages of
// DefaultPageSize with no byte limit.
type DrainOptions struct {
	// PageSize is the limit of each List call; zero means DefaultPageSize.
	PageSize int
	// MaxBytes, when positive, bounds the keys and values the drain may
	// hold: a prefix holding more fails with ErrRefused as soon as the
	// drain passes it, so the caller's memory stays bounded.
	MaxBytes int64
}

// Drain is the one full-prefix read: it drains List for prefix and returns
// every matching item sorted by key, and the number of List pages it read
// (its whole backend work, restarts included). An expired cursor restarts
// the drain from the beginning, at most three times. ListAll and the node's
// catalog cache are built on it.
func (s *Store) Drain(ctx context.Context, prefix string, o *DrainOptions) (items []Item, pages int, err error) {
	var opts DrainOptions
	if o != nil {
		opts = *o
	}
	if opts.PageSize == 0 {
		opts.PageSize = DefaultPageSize
	}
	for attempt := 0; ; attempt++ {
		var n int
		items, n, err = s.drain(ctx, prefix, opts)
		pages += n
		if errors.Is(err, ErrCursorExpired) && attempt < maxDrainRestarts {
			continue
		}
		return items, pages, err
	}
}

func (s *Store) drain(ctx context.Context, prefix string, o DrainOptions) ([]Item, int, error) {
	var all []Item
	cur := ""
	pages := 0
	var held int64
	for {
		page, err := s.List(ctx, prefix, o.PageSize, cur)
		pages++
		if err != nil {
			return nil, pages, err
		}
		for _, it := range page.Items {
			held += int64(ItemBytes(it.Key, it.Value))
		}
		if o.MaxBytes > 0 && held > o.MaxBytes {
			return nil, pages, fmt.Errorf("%w: prefix %q holds more than %d bytes of keys and values, the limit of this drain", ErrRefused, prefix, o.MaxBytes)
		}
		all = append(all, page.Items...)
		if page.Cursor == "" {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, pages, err
		}
		cur = page.Cursor
	}
	slices.SortFunc(all, func(a, b Item) int { return strings.Compare(a.Key, b.Key) })
	// Pages hold each key once by contract; a duplicate can only come from
	// a concurrent write re-inserting a key behind the drain position, and
	// one copy of it is enough.
	all = slices.CompactFunc(all, func(a, b Item) bool { return a.Key == b.Key })
	return all, pages, nil
}

// Close closes the backend. Operations after Close return ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.d.Close()
}

func (s *Store) check(key string) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return ValidateKey(key)
}

func validateExpect(e Expect) error {
	if e.Absent() {
		return nil
	}
	if err := ValidateValue(e.Value()); err != nil {
		return fmt.Errorf("expected %w", err)
	}
	return nil
}

// nonNil turns a nil value into an empty one, so backends never see the two
// spellings of "empty".
func nonNil(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}

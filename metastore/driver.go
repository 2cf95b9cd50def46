package metastore

import "context"

// Driver is what a backend implements. The Store validates every argument
// before calling a Driver, so a Driver may assume valid keys, values, limits
// and cursor positions that it issued itself for the same prefix; it still
// validates what only it can (a position outside the prefix, a position from
// another layout or epoch).
//
// Errors a Driver returns MUST match the sentinels of this package with
// errors.Is wherever one applies; the Store does not translate them.
type Driver interface {
	// Name identifies the backend and layout, for example "bolt" or
	// "dynamodb-v2". Cursors carry it; a cursor from another Name is refused.
	Name() string

	// Get returns the value of key, or an error matching ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)

	// Put writes value under key unconditionally.
	Put(ctx context.Context, key string, value []byte) error

	// CAS writes value under key only if its current state satisfies
	// expect; otherwise it returns an error matching ErrConflict.
	CAS(ctx context.Context, key string, expect Expect, value []byte) error

	// GuardedMutate applies target atomically if, at one instant, guard.Key
	// holds exactly guard.Value and target.Key satisfies target.Expect;
	// otherwise it returns an error matching ErrConflict. guard.Key differs
	// from target.Key.
	GuardedMutate(ctx context.Context, guard Guard, target Mutation) error

	// Delete removes key only if it holds exactly expected; otherwise it
	// returns an error matching ErrConflict (also when key is absent).
	Delete(ctx context.Context, key string, expected []byte) error

	// List returns the user items whose keys start with prefix, continuing
	// after position pos (nil: from the start). It evaluates at most limit
	// items per backend request and returns at most limit items; it MUST
	// end the page before an item that would take its keys and values over
	// MaxPageBytes (PageFull), and still return at least one item when one
	// remains; next is nil when the listing is complete. Control records
	// are never returned.
	List(ctx context.Context, prefix string, limit int, pos []byte) (items []Item, next []byte, err error)

	// Close releases the backend's resources.
	Close() error
}

// Health is an optional ability of a Driver that can be stopped for good
// while it runs, such as a bolt file found damaged: Health returns nil while
// the driver serves, and the error that stopped it afterwards. A node's
// readiness follows it, so that a load balancer stops sending requests that
// can only fail.
type Health interface {
	Health() error
}

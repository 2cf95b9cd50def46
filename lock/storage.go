package lock

import (
	"context"
	"time"
)

// Clock is an optional ability of a Storage: the store's own wall clock. A
// Locker over a storage that has one stamps its records (acquired at,
// expiry, released at) and judges a holder's expiry under Options.ClockSkew
// by the store's clock instead of its host's, so that the skew bound covers
// only the error of that one clock as the hosts estimate it, not the drift
// between the hosts (the S3 storage: S3's own clock, from its responses).
type Clock interface {
	Now() time.Time
}

// Storage is what a lock needs from a store: five operations on its own
// records, in a keyspace of its own. The metastore contract implements it
// (Metastore), and so can any store with a strongly consistent read, a
// conditional write and an atomic write guarded on another record.
//
// Keys are the lock's own ("rec/NS/NAME", "exp/NS/NAME", "gen/NS"); an
// implementation maps them into its store (the metastore adapter puts them
// under "lock/"). Values are opaque bytes compared exactly; the lock never
// writes an empty value. Errors MUST be classifiable with errors.Is against
// the metastore sentinels: ErrNotFound for a missing record, ErrConflict for a
// failed condition, ErrUnavailable when the outcome of a write is unknown (it
// may have been applied), ErrWritesPaused when the store refused a write for
// now (nothing applied). Anything else aborts the lock operation.
type Storage interface {
	// Get returns the current value of key, strongly consistent; ErrNotFound
	// if it does not exist.
	Get(ctx context.Context, key string) ([]byte, error)
	// Create writes value under key only if key does not exist; ErrConflict
	// otherwise.
	Create(ctx context.Context, key string, value []byte) error
	// Swap replaces the value of key with value only if key holds exactly
	// old; ErrConflict otherwise (including when key is absent).
	Swap(ctx context.Context, key string, old, value []byte) error
	// List returns every record whose key starts with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]Record, error)
	// Fenced applies m only while fence.Key holds exactly fence.Value, in one
	// atomic write: if either condition fails nothing is applied and the
	// error matches ErrConflict. fence.Key and m.Key differ.
	Fenced(ctx context.Context, fence Record, m Mutation) error
}

// Record is one key of the lock keyspace and its value. As a fence it names
// a lock record and the exact bytes it must hold.
type Record struct {
	Key   string
	Value []byte
}

// Mutation is the target of a fenced write: Key gets Value if it holds
// exactly Old, or, when Old is nil, if it does not exist.
type Mutation struct {
	Key   string
	Old   []byte
	Value []byte
}

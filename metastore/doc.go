// Package metastore is the contract of lake's metadata plane: one portable
// Store type that every backend is opened into, the errors it returns, and the
// rules every key, value and cursor obeys.
//
// # Operations
//
// A Store offers strongly consistent point reads (Get), unconditional writes
// (Put), compare-and-swap (CAS), a guarded mutation of one key under the exact
// value of another (GuardedMutate), delete-if-equals (Delete), one page of a
// prefix (List) and the drained, sorted listing built on it (ListAll).
// Comparisons are exact bytes.
//
// # Keys and values
//
// A key is a non-empty UTF-8 path of at most MaxKeyBytes bytes with no NUL
// byte, such as "tbl/orders" or "append-operation/orders/000042". Its family is
// its first path segment, or "root" for a key without "/". Keys starting with
// ControlPrefix belong to lake itself (migration state, registries, layout
// parameters): the Store refuses them with ErrReservedKey and never lists them.
// A value is at most MaxValueBytes bytes, so that it fits one DynamoDB item on
// every layout. Limits are checked before any backend request and refused
// with an error; nothing is ever truncated.
//
// # Paging
//
// List returns at most limit items and an opaque cursor; an empty cursor means
// the listing is complete. A page also ends early at a byte budget,
// MaxPageBytes (1 MiB) of keys and values, though it always holds at least one
// item: memory per page is bounded by bytes, not only by items. A page may be empty while its cursor is not (a
// backend that filters may evaluate a whole page of non-matching items), so
// callers loop until the cursor is empty. Page order is the backend's own;
// only ListAll promises key order. Cursors are versioned and checksummed and
// carry the prefix and backend they were issued for: a cursor used with
// another prefix or backend, or corrupted, is refused with ErrInvalidCursor; a
// cursor issued before a layout change is refused with ErrCursorExpired and
// the listing must restart.
//
// # Errors
//
// Every error a Store returns can be classified with errors.Is against the
// sentinels in this package: ErrNotFound, ErrConflict, ErrInvalidKey,
// ErrInvalidValue, ErrReservedKey, ErrInvalidArgument, ErrInvalidCursor,
// ErrCursorExpired, ErrWritesPaused, ErrRefused, ErrUnavailable and ErrClosed.
// Messages start with "lake: ".
//
// # Drivers
//
// Each backend is a subpackage of this one, the same rule the datastore
// follows: boltstore (bbolt), dynamostore (DynamoDB, both layouts) and
// remotestore (a node). storetest is the conformance suite they all pass.
package metastore

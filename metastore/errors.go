package metastore

import (
	"errors"
	"fmt"
)

// Errors returned by a Store. Backends wrap them (fmt.Errorf with %w) to add
// the key or the cause; callers classify with errors.Is.
var (
	// ErrNotFound is returned by Get when the key does not exist.
	ErrNotFound = errors.New("lake: key not found")

	// ErrConflict is returned by CAS, GuardedMutate and Delete when a current
	// value differs from the expected one (including present-vs-absent).
	ErrConflict = errors.New("lake: conflict")

	// ErrInvalidKey is returned for an empty key, a key that is not valid
	// UTF-8, contains NUL, or is longer than MaxKeyBytes.
	ErrInvalidKey = errors.New("lake: invalid key")

	// ErrInvalidValue is returned for a value larger than MaxValueBytes.
	ErrInvalidValue = errors.New("lake: invalid value")

	// ErrReservedKey is returned for a key or prefix under ControlPrefix.
	ErrReservedKey = errors.New("lake: reserved key")

	// ErrInvalidArgument is returned for any other argument the contract
	// forbids, such as a page limit out of range or a GuardedMutate whose
	// guard is its own target.
	ErrInvalidArgument = errors.New("lake: invalid argument")

	// ErrInvalidCursor is returned for a cursor that is corrupted, issued
	// for another prefix or backend, or points outside its prefix.
	ErrInvalidCursor = errors.New("lake: invalid cursor")

	// ErrCursorExpired is returned for a cursor issued before a layout or
	// epoch change; the listing must restart from an empty cursor.
	ErrCursorExpired = errors.New("lake: cursor expired")

	// ErrWritesPaused is returned for a mutation while write admission is
	// paused (for example during migration finalization); retry later.
	ErrWritesPaused = errors.New("lake: writes paused")

	// ErrRefused is returned for an operation that the current state of the
	// store forbids (for example a migration step out of order).
	ErrRefused = errors.New("lake: refused")

	// ErrUnavailable is returned for a transient backend failure (throttling,
	// 5xx, transaction conflicts) that outlived the retries; the operation
	// may be retried.
	ErrUnavailable = errors.New("lake: backend unavailable")

	// ErrClosed is returned by every operation on a closed Store.
	ErrClosed = errors.New("lake: store closed")

	// ErrDiverged is returned for a mutation that found a copy of its key
	// differing from the authority (during a DynamoDB migration: the v2
	// copy differs from v1): it failed closed, nothing changed. It names
	// the command that repairs the copy (`lake dynamo-migrate repair`);
	// retry after it. It also matches ErrUnavailable, so that generic
	// callers treat it as an operation to retry rather than a conflict.
	ErrDiverged error = divergedError{}
)

type divergedError struct{}

func (divergedError) Error() string        { return "lake: diverged copy" }
func (divergedError) Is(target error) bool { return target == ErrUnavailable }

// ConflictError is the error of a failed condition. It matches ErrConflict
// with errors.Is and names the key whose value differed.
type ConflictError struct {
	// Key is the key whose current value did not match.
	Key string
	// Reason says which condition failed, in a few words.
	Reason string
}

// Error renders the conflict as one line naming the key.
func (e *ConflictError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("%v: %q", ErrConflict, e.Key)
	}
	return fmt.Sprintf("%v: %q: %s", ErrConflict, e.Key, e.Reason)
}

// Is reports whether target is ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Conflict returns a *ConflictError for key.
func Conflict(key, reason string) error { return &ConflictError{Key: key, Reason: reason} }

// NotFound returns ErrNotFound wrapped with key.
func NotFound(key string) error { return fmt.Errorf("%w: %q", ErrNotFound, key) }

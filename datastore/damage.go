package datastore

import (
	"errors"
	"fmt"
)

// ErrDamaged matches a *DamageError: an object or item of the store holds
// what lake never writes there (a foreign writer, a truncated or edited
// object, a key that names no partition). Nothing is retried over it; the
// error names the object and `lake data check`, which reports every such
// object and, with --repair, rebuilds what can be derived and moves the
// rest aside. It also matches a *DamagedError: a file whose bytes do not
// match its size and SHA-256.
var ErrDamaged = errors.New("lake: damaged store object")

// DamageError names a damaged object or item of a datastore and what is
// wrong with it.
type DamageError struct {
	// Object is the backend's name of the object or item (an S3 key, a
	// bolt bucket and key, a DynamoDB key).
	Object string
	// Problem says what is wrong, in a few words.
	Problem string
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("lake: %s is damaged: %s (run lake data check; --repair rebuilds or sets it aside)", e.Object, e.Problem)
}

// Is makes a *DamageError match ErrDamaged.
func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

// Damaged returns a *DamageError for object.
func Damaged(object, format string, args ...any) error {
	return &DamageError{Object: object, Problem: fmt.Sprintf(format, args...)}
}

package lock

import (
	"errors"
	"fmt"
	"time"
)

// Errors of the lock package; the store's own errors pass through and are
// classified with the metastore sentinels.
var (
	// ErrTimeout is returned by Acquire when its wait runs out while
	// another holder holds the lock; the error is a *TimeoutError naming
	// the holder.
	ErrTimeout = errors.New("lake: lock wait ran out")

	// ErrLost is the cause of a lease's context once the lock is lost (its
	// lease ran out without a confirmed renewal, or another holder took it
	// over or a forced release broke it), and is returned by a fenced write
	// refused for that reason.
	ErrLost = errors.New("lake: lock lost")

	// ErrReleased is the cause of a lease's context after Release.
	ErrReleased = errors.New("lake: lock released")
)

// TimeoutError is the error of a wait that ran out. It matches ErrTimeout.
type TimeoutError struct {
	Name string
	Wait time.Duration
	// Holder is the lock as last seen: who holds it, since when, until when.
	Holder Info
}

// Error says who holds the lock and since when.
func (e *TimeoutError) Error() string {
	h := e.Holder
	return fmt.Sprintf("%v: %s: waited %v; held by %s (host %s, pid %d) since %s, token %s, expires %s",
		ErrTimeout, e.Name, e.Wait, h.Holder, h.Host, h.PID, h.Acquired.Format(time.RFC3339Nano), h.Token, h.Expires.Format(time.RFC3339Nano))
}

// Is reports whether target is ErrTimeout.
func (e *TimeoutError) Is(target error) bool { return target == ErrTimeout }

package treesync

import (
	"fmt"
	"strings"
)

// AfterCommitError is a sync whose commit stood (its changes are in the
// store, and Report.Committed counts them) but a step after it failed:
// the catalog fold or the lifecycle's expiry, saving the local state, or
// releasing the lock. It is never a conflict or a lost lock, whatever Err
// is (a fold refused by its fence included): scripts must not take the
// sync for refused and redo it. The next sync does the step again.
type AfterCommitError struct {
	// Committed is the number of changes the commit applied.
	Committed int
	// Step names what failed: "catalog fold", "lifecycle", "save state",
	// "release".
	Step string
	Err  error
}

func (e *AfterCommitError) Error() string {
	msg := e.Err.Error()
	for _, p := range []string{"lake: ", e.Step + ": ", "lake: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return fmt.Sprintf("lake: the commit stood (%d changes committed), then the %s failed: %s; the next sync does it again",
		e.Committed, e.Step, msg)
}

// Unwrap returns the step's error, for errors.Is on its cause; the CLI
// maps an AfterCommitError to its own exit status before looking there.
func (e *AfterCommitError) Unwrap() error { return e.Err }

// afterCommit wraps err, if any, as a failure after a commit that stood.
func afterCommit(committed int, step string, err error) error {
	if err == nil {
		return nil
	}
	return &AfterCommitError{Committed: committed, Step: step, Err: err}
}

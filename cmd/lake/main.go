// Command lake is the command-line tool of lake's metadata plane: it reads
// and writes a metadata store named by a store URL. Run `lake --help`.
//
// # Wiring only
//
// This package parses flags, opens what the store URLs name (storeurl,
// dsurl, the lock storage of a URL), calls one package function per
// command, prints its result and maps its error to an exit code. Anything
// a test of the behaviour would want to call without the binary (a
// protocol, a retry, a verdict, a file a command keeps, how a benchmark's
// store is opened) lives in the package it belongs to: reshape (its files
// beside the spec, a plan's verdict, the ends of a rewrite), bench/syncload
// (OpenData), datastore (Check), and so on. One cobra command per file,
// cmd_<verb>.go.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/treesync"
)

// Exit codes, documented in the README; scripts depend on them.
// NB: must not change.
const (
	exitOK       = 0
	exitError    = 1
	exitUsage    = 2
	exitNotFound = 3
	exitConflict = 4
	exitPaused   = 5
	exitRefused  = 6
	exitDiverged = 7
	exitLockWait = 8 // a wait for a lock ran out
	exitPartial  = 9 // a sync synced everything but the paths it named
	// exitAfterCommit: a sync's commit stood, a step after it failed
	// (catalog fold, lifecycle, saving the state, releasing the lock).
	exitAfterCommit = 10
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	var st exitStatus // a command run under a lock: its status, silently
	if err != nil && !errors.As(err, &st) {
		fmt.Fprintln(os.Stderr, errorLine(err))
	}
	os.Exit(exitCode(err))
}

// usageError marks an error in how the command was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitCode maps an error to the documented exit code.
func exitCode(err error) int {
	var ue usageError
	var st exitStatus
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &st):
		return int(st)
	case errors.As(err, new(*treesync.AfterCommitError)):
		// Before the cause's own code: the commit stood, so the sync
		// must not look refused (exit 4) to a script that would redo it.
		return exitAfterCommit
	case errors.Is(err, lock.ErrTimeout):
		return exitLockWait
	case errors.Is(err, treesync.ErrPartial):
		return exitPartial
	case errors.As(err, &ue),
		errors.Is(err, metastore.ErrInvalidKey),
		errors.Is(err, metastore.ErrInvalidValue),
		errors.Is(err, metastore.ErrReservedKey),
		errors.Is(err, metastore.ErrInvalidArgument),
		errors.Is(err, metastore.ErrInvalidCursor):
		return exitUsage
	case errors.Is(err, metastore.ErrDiverged):
		// Before ErrUnavailable's exit 1: a diverged copy has its own fix.
		return exitDiverged
	case errors.Is(err, metastore.ErrNotFound):
		return exitNotFound
	case errors.Is(err, metastore.ErrConflict):
		return exitConflict
	case errors.Is(err, metastore.ErrWritesPaused):
		return exitPaused
	case errors.Is(err, metastore.ErrRefused):
		return exitRefused
	default:
		return exitError
	}
}

// errorLine renders err as the one line printed on stderr.
func errorLine(err error) string {
	msg := err.Error()
	if errors.Is(err, context.Canceled) {
		msg = "interrupted"
	}
	if len(msg) < 6 || msg[:6] != "lake: " {
		msg = "lake: " + msg
	}
	return msg
}

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/treesync"
)

// wantLakeOnce fails if a line of stderr says "lake:" more than once at
// its start or wraps another "lake: " message inside (issue 27, row 7).
func wantLakeOnce(t *testing.T, what, stderr string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if line == "" {
			continue
		}
		if strings.Contains(line, "lake: lake:") || strings.Contains(line, ": lake: ") || strings.Contains(line, "; lake: ") {
			t.Errorf("%s: %q says lake: twice", what, line)
		}
	}
}

// TestErrorsSayLakeOnce walks the CLI's error paths (bad flags, bad
// namespaces and paths, reserved paths, not found, usage) across commands.
func TestErrorsSayLakeOnce(t *testing.T) {
	dir := t.TempDir()
	ok(t, run(t, dir, "", "init"))
	ok(t, run(t, dir, "", "data", "init"))
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		code int
		args []string
	}{
		{exitUsage, []string{"data", "sync", "--namespace", "a/b"}},
		{exitUsage, []string{"data", "status", "--namespace", "-x"}},
		{exitUsage, []string{"data", "lifecycle", "--namespace", "a/b"}},
		{exitUsage, []string{"data", "prune", "--namespace", "a/b"}},
		{exitUsage, []string{"data", "ls", "--namespace", "a/b"}},
		{exitUsage, []string{"data", "put", "data/.lake/x", "f"}},
		{exitUsage, []string{"data", "put", ".lake/dirty", "f"}},
		{exitUsage, []string{"data", "put", "../x", "f"}},
		{exitUsage, []string{"data", "put", "data/x", "f", "--meta", "/nonexistent"}},
		{exitNotFound, []string{"data", "get", "data/nope"}},
		{exitNotFound, []string{"data", "rm", "data/nope"}},
		{exitNotFound, []string{"data", "stat", "data/nope"}},
		{exitUsage, []string{"data", "changes", ".."}},
		{exitUsage, []string{"data", "sync", "--prefer", "bogus"}},
		{exitUsage, []string{"data", "sync", "-C", "/nonexistent"}},
		{exitUsage, []string{"data", "sync", "--model", "../x"}},
		{exitUsage, []string{"data", "sync", "--lease", "-1s"}},
		{exitUsage, []string{"data", "run"}},
		{exitUsage, []string{"data", "lock", "release", "x", "--force", "--token", "1"}},
		{exitUsage, []string{"data", "lock", "release", "a/sync", "--force", "--token", "zz"}},
		{exitUsage, []string{"data", "catalog", "--since", "garbage"}},
		{exitUsage, []string{"lock", "release", "a/b", "--force", "--token", "zz"}},
		{exitUsage, []string{"lock", "status", ""}},
		{exitNotFound, []string{"get", "nokey"}},
		{exitUsage, []string{"get", ""}},
		{exitUsage, []string{"ls", "--limit", "-1"}},
		{exitUsage, []string{"--store", "bogus://x", "get", "k"}},
		{exitUsage, []string{"--store", "dynamodb://", "get", "k"}},
		{exitError, []string{"--store", "http://127.0.0.1:1", "get", "k"}},
		{exitError, []string{"--store", "bolt:///nonexistent/dir/x.db", "get", "k"}},
		{exitUsage, []string{"serve", "--listen", "bogus"}},
		{exitUsage, []string{"serve", "--token-file", "/nonexistent"}},
	} {
		r := run(t, dir, "", c.args...)
		what := strings.Join(c.args, " ")
		if r.code != c.code {
			t.Errorf("%s: exit %d, want %d (%q)", what, r.code, c.code, r.stderr)
		}
		if !strings.HasPrefix(r.stderr, "lake: ") {
			t.Errorf("%s: stderr %q does not start with lake:", what, r.stderr)
		}
		wantLakeOnce(t, what, r.stderr)
	}
}

// TestErrorLinesOfLostLocks: the errors a lost lock and a partial sync end
// with say lake: once.
func TestErrorLinesOfLostLocks(t *testing.T) {
	for _, err := range []error{
		stoppedError(lock.ErrLost, "method.sh"),
		stoppedError(context.Canceled, "method.sh"),
		usageError{errors.Join(metastore.ErrInvalidArgument)},
		&treesync.SkippedError{Skipped: []treesync.Skipped{{Path: "data/x/y", Why: "why"}}},
	} {
		wantLakeOnce(t, "error line", errorLine(err))
		if !strings.HasPrefix(errorLine(err), "lake: ") {
			t.Errorf("%q does not start with lake:", errorLine(err))
		}
	}
	if !errors.Is(stoppedError(lock.ErrLost, "x"), lock.ErrLost) {
		t.Error("stoppedError lost its cause")
	}
	if got := exitCode(&treesync.SkippedError{}); got != exitPartial {
		t.Errorf("exit code of a partial sync: %d, want %d", got, exitPartial)
	}
}

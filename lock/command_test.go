package lock

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRunCommand: a command under a lease finds its token and name in its
// environment and its exit status is its own; when the context ends or the
// lease is lost it is stopped (SIGTERM, then SIGKILL after grace for one
// that ignores SIGTERM), and the cause is returned; a command that cannot
// start says so with "lake: " once.
func TestRunCommand(t *testing.T) {
	l := newLocker(t, Metastore(newBolt(t)), Options{})
	ctx := t.Context()
	ls, err := l.Acquire(ctx, "ns/run")
	if err != nil {
		t.Fatal(err)
	}
	want := ls.Token().String()
	c := exec.Command("sh", "-c", `test "$LAKE_FENCING_TOKEN" = "`+want+`" && test "$LAKE_LOCK_NAME" = ns/run && exit 3`)
	stopped, err := RunCommand(ctx, ls, c, time.Second)
	var ee *exec.ExitError
	if stopped != nil || !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("a command that exits 3 with its token: stopped %v, err %v", stopped, err)
	}

	why := errors.New("told to stop")
	cctx, cancel := context.WithCancelCause(ctx)
	time.AfterFunc(100*time.Millisecond, func() { cancel(why) })
	start := time.Now()
	c = exec.Command("sh", "-c", `trap "" TERM; exec sleep 30`)
	stopped, err = RunCommand(cctx, ls, c, 200*time.Millisecond)
	if !errors.Is(stopped, why) || err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("a command that ignores SIGTERM, its context ended: stopped %v, err %v after %v", stopped, err, time.Since(start))
	}
	if ws := c.ProcessState.String(); !strings.Contains(ws, "killed") {
		t.Errorf("it ended as %q, want killed", ws)
	}

	time.AfterFunc(100*time.Millisecond, func() { ls.Release(context.Background()) })
	c = exec.Command("sleep", "30")
	stopped, _ = RunCommand(ctx, ls, c, 5*time.Second)
	if stopped == nil || !strings.Contains(c.ProcessState.String(), "terminated") {
		t.Fatalf("a command whose lease was released: stopped %v, state %v", stopped, c.ProcessState)
	}

	ls2, err := l.Acquire(ctx, "ns/run")
	if err != nil {
		t.Fatal(err)
	}
	defer ls2.Release(context.Background())
	c = exec.Command("/nonexistent/lake-test-command")
	if _, err := RunCommand(ctx, ls2, c, time.Second); c.ProcessState != nil || err == nil || !strings.HasPrefix(err.Error(), "lake: start /nonexistent/lake-test-command") || strings.Count(err.Error(), "lake: ") != 1 {
		t.Errorf("a command that cannot start: %v", err)
	}
}

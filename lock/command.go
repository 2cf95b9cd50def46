package lock

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Environment variables a command run under a lease (RunCommand) finds:
// the lease's fencing token (Token.String) and the lock's name, so that
// what it writes elsewhere can carry the token and be fenced.
const (
	FencingTokenEnv = "LAKE_FENCING_TOKEN"
	LockNameEnv     = "LAKE_LOCK_NAME"
)

// RunCommand starts c while ls is held and waits for it to end. c's
// environment (os.Environ() when c.Env is nil) gets FencingTokenEnv and
// LockNameEnv. When ls is lost or ctx ends before c does, c gets SIGTERM,
// then SIGKILL after grace, and RunCommand returns once it has ended, with
// stopped set to the cause (context.Cause of ctx, else of ls.Context()).
// err is c's Wait error (an *exec.ExitError for a non-zero status), or the
// error of starting it, when c.ProcessState is nil. RunCommand neither
// renews nor releases ls: the heartbeat does, and the caller releases.
//
// It is what `lake lock run` and `lake data run` share: a command whose
// lease ends is stopped, never left running unfenced.
func RunCommand(ctx context.Context, ls *Lease, c *exec.Cmd, grace time.Duration) (stopped, err error) {
	if c.Env == nil {
		c.Env = os.Environ()
	}
	c.Env = append(c.Env, FencingTokenEnv+"="+ls.Token().String(), LockNameEnv+"="+ls.Name())
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("lake: start %s: %w", c.Args[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return nil, err
	case <-ls.Context().Done():
	case <-ctx.Done():
	}
	err = stopCommand(c, done, grace)
	stopped = context.Cause(ctx)
	if stopped == nil {
		stopped = context.Cause(ls.Context())
	}
	return stopped, err
}

// stopCommand sends SIGTERM, then SIGKILL after grace, and returns the
// command's Wait error once it has ended.
func stopCommand(c *exec.Cmd, done <-chan error, grace time.Duration) error {
	c.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		c.Process.Kill()
		return <-done
	}
}

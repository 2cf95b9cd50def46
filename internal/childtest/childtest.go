// Package childtest starts copies of the running test binary as separate
// processes, for tests whose subject is what several processes do to one
// store: a lock's holders, a paused (SIGSTOP) holder coming back.
//
// The parent passes a child its configuration as JSON in an environment
// variable; the child's TestMain finds it there, does its work and exits
// before any test runs. Start runs the binary with
// -test.run=^$, so a child that does not find its variable runs nothing.
package childtest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// Child is a running copy of the test binary.
type Child struct {
	// Cmd is the child's command; its ProcessState is set once Done is
	// closed.
	Cmd *exec.Cmd
	// Out and Err collect the child's standard output and error; read
	// them only after Done is closed.
	Out, Err bytes.Buffer
	done     chan struct{}
}

// Start starts the test binary with cfg, as JSON, in the environment
// variable env. The child is resumed (if paused) and killed when the test
// ends, and waited for.
func Start(t testing.TB, env string, cfg any) *Child {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &Child{Cmd: exec.Command(os.Args[0], "-test.run=^$"), done: make(chan struct{})}
	c.Cmd.Env = append(os.Environ(), env+"="+string(raw))
	c.Cmd.Stdout, c.Cmd.Stderr = &c.Out, &c.Err
	if err := c.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.Cmd.Wait() // its error is in ProcessState
		close(c.done)
	}()
	t.Cleanup(func() {
		c.Resume()
		c.Cmd.Process.Kill()
		<-c.done
	})
	return c
}

// Done is closed when the child has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// Pause stops the child (SIGSTOP), as a scheduler or a debugger would.
func (c *Child) Pause() error { return c.Cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused child (SIGCONT).
func (c *Child) Resume() { c.Cmd.Process.Signal(syscall.SIGCONT) }

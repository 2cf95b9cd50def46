package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/lakemeta/lake/internal/lakeerr"
	"github.com/lakemeta/lake/lock"
	"github.com/spf13/cobra"
)

// exitStatus is the exit status of a command run under a lock, passed
// through as lake's own; it prints nothing.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("command exited with status %d", int(e)) }

func newLockCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Lease locks with fencing tokens: run a command under a lock, inspect, list, break",
		Long: `Lease locks with fencing tokens, kept in the store under lock/. A lock is named
NAMESPACE/NAME; locks of different namespaces never contend. Every acquisition
gets a fencing token (a decimal integer) larger than every earlier one for the
name, across releases, crashes and forced releases, so a resource that keeps the
largest token it has accepted can refuse a stale holder. See docs/locks.md.
With --store s3://BUCKET/PREFIX the locks live in the bucket, beside the S3
datastore, every request conditional (docs/s3.md).

Exit codes: as lake's, and 8 when a wait for a lock runs out.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newLockRunCommand(g), newLockStatusCommand(g), newLockLsCommand(g), newLockReleaseCommand(g))
	return cmd
}

type lockRunOptions struct {
	lease, heartbeat, wait, skew, grace time.Duration
	holder                              string
}

func newLockRunCommand(g *globalOptions) *cobra.Command {
	var o lockRunOptions
	cmd := &cobra.Command{
		Use:   "run NAME [flags] -- CMD [ARG...]",
		Short: "Run CMD while holding the lock NAME",
		Long: `Acquire the lock NAME (NAMESPACE/NAME), waiting up to --wait while another holder
holds it, then run CMD with the fencing token in the environment as
LAKE_FENCING_TOKEN (and the lock's name as LAKE_LOCK_NAME). stdin, stdout and
stderr are CMD's; lake exits with CMD's exit status (128+N if a signal N ended
it) and releases the lock when CMD ends. The lock heartbeats every --heartbeat
(a third of --lease by default). If the lock is lost (the lease ran out without
a confirmed renewal, or a forced release broke it), CMD is sent SIGTERM, then
SIGKILL after --grace, and lake exits 1. SIGINT or SIGTERM to lake is passed on
to CMD the same way.

A wait that runs out exits 8 and says who holds the lock and since when.
--clock-skew D lets a waiter take over a dead holder once its expiry plus D has
passed; without it, a waiter first observes the lock unchanged for a full lease.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return usagef("usage: %s (NAME, then -- and the command)", cmd.UseLine())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withFencedLocks(cmd.Context(), func(st lock.Storage, fence takeoverFence) error {
				return runLockRun(cmd.Context(), st, fence, o, args[0], args[1:])
			})
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.lease, "lease", lock.DefaultLease, "how long the lock is kept without a renewal")
	f.DurationVar(&o.heartbeat, "heartbeat", 0, "interval between renewals, at most a third of --lease (default a third)")
	f.DurationVar(&o.wait, "wait", lock.DefaultWait, "how long to wait for a held lock (0: try once)")
	f.DurationVar(&o.skew, "clock-skew", 0, "bound on clock skew between holders; enables the faster takeover of a dead holder")
	f.DurationVar(&o.grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL when CMD must stop")
	f.StringVar(&o.holder, "holder", "", "holder id shown by status (default HOST-PID-RANDOM)")
	return cmd
}

func runLockRun(ctx context.Context, st lock.Storage, fence takeoverFence, o lockRunOptions, name string, argv []string) error {
	wait := o.wait
	if wait == 0 {
		wait = lock.NoWait
	}
	if o.grace < 0 {
		return usagef("--grace must not be negative")
	}
	l, err := lock.New(st, &lock.Options{Lease: o.lease, Heartbeat: o.heartbeat, Wait: wait, ClockSkew: o.skew, Holder: o.holder})
	if err != nil {
		return err
	}
	ls, err := l.Acquire(ctx, name)
	if err != nil {
		return err
	}
	defer ls.Release(context.WithoutCancel(ctx))
	if ls.TookOver() && fence != nil {
		if err := fence(ctx, name, ls); err != nil {
			return err
		}
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	stopped, err := lock.RunCommand(ctx, ls, c, o.grace)
	switch {
	case c.ProcessState == nil:
		return err
	case stopped != nil && ctx.Err() != nil:
		return ctx.Err()
	case stopped != nil:
		return fmt.Errorf("%w; %s was stopped", stopped, argv[0])
	}
	if rerr := ls.Release(context.WithoutCancel(ctx)); rerr != nil {
		return rerr
	}
	return statusOf(c, err)
}

// statusOf turns a finished command into lake's exit status.
func statusOf(c *exec.Cmd, err error) error {
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return fmt.Errorf("lake: %w", err)
	}
	ws, ok := c.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		return exitStatus(128 + int(ws.Signal()))
	case c.ProcessState.ExitCode() != 0:
		return exitStatus(c.ProcessState.ExitCode())
	}
	return nil
}

type lockViewOptions struct{ json bool }

func newLockStatusCommand(g *globalOptions) *cobra.Command {
	var o lockViewOptions
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show who holds the lock NAME, since when, until when, and its token",
		Long: `Show the lock NAME (NAMESPACE/NAME): held or free, the holder's id, host and pid,
when it was acquired, its lease, its expiry (the last renewal plus the lease, by
the holder's clock) and the fencing token. --json prints one JSON object.
A lock never acquired exits 3.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withLockReader(cmd.Context(), func(st lock.Storage) error {
				l, err := lock.New(st, nil)
				if err != nil {
					return err
				}
				info, err := l.Inspect(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if o.json {
					return json.NewEncoder(cmd.OutOrStdout()).Encode(info)
				}
				printInfo(cmd.OutOrStdout(), info)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func stateOf(in lock.Info) string {
	switch {
	case in.Held && in.Expired:
		return "held (expired)"
	case in.Held:
		return "held"
	case in.Forced:
		return "free (force-released)"
	}
	return "free"
}

func printInfo(w io.Writer, in lock.Info) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "name:\t%s\n", in.Name)
	fmt.Fprintf(tw, "state:\t%s\n", stateOf(in))
	fmt.Fprintf(tw, "token:\t%s (generation %d, sequence %d)\n", in.Token, in.Token.Generation(), in.Token.Sequence())
	if in.Held {
		fmt.Fprintf(tw, "holder:\t%s\n", in.Holder)
		fmt.Fprintf(tw, "host:\t%s\n", in.Host)
		fmt.Fprintf(tw, "pid:\t%d\n", in.PID)
		fmt.Fprintf(tw, "acquired:\t%s (%s ago)\n", in.Acquired.Format(time.RFC3339Nano), time.Since(in.Acquired).Round(time.Millisecond))
		fmt.Fprintf(tw, "lease:\t%s\n", in.Lease)
		fmt.Fprintf(tw, "expires:\t%s\n", in.Expires.Format(time.RFC3339Nano))
	} else if !in.Released.IsZero() {
		fmt.Fprintf(tw, "released:\t%s\n", in.Released.Format(time.RFC3339Nano))
	}
	tw.Flush()
}

func newLockLsCommand(g *globalOptions) *cobra.Command {
	var o lockViewOptions
	cmd := &cobra.Command{
		Use:   "ls NAMESPACE",
		Short: "List the locks of NAMESPACE",
		Long: `List every lock of NAMESPACE, sorted by name, one per line: name, state, token,
holder and expiry. --json prints one JSON object per lock.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withLockReader(cmd.Context(), func(st lock.Storage) error {
				l, err := lock.New(st, nil)
				if err != nil {
					return err
				}
				infos, err := l.List(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if o.json {
					enc := json.NewEncoder(out)
					for _, in := range infos {
						if err := enc.Encode(in); err != nil {
							return err
						}
					}
					return nil
				}
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tSTATE\tTOKEN\tHOLDER\tEXPIRES")
				for _, in := range infos {
					holder, expires := "-", "-"
					if in.Held {
						holder, expires = in.Holder, in.Expires.Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", in.Name, stateOf(in), in.Token, holder, expires)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON lines")
	return cmd
}

type lockReleaseOptions struct {
	force bool
	token string
}

func newLockReleaseCommand(g *globalOptions) *cobra.Command {
	var o lockReleaseOptions
	cmd := &cobra.Command{
		Use:   "release NAME --force --token T",
		Short: "Break the lock NAME held with token T (a forced release)",
		Long: `Break the lock NAME, which must be held with fencing token T (see lake lock
status). The lock becomes free; its holder's fenced writes are refused from then
on, and it learns of the loss at its next renewal (its command is stopped by
lake lock run). If the lock is free or held with another token, nothing is
done and lake exits 4 (conflict). A holder releases its own lock by ending:
--force is required because this breaks someone else's.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !o.force {
				return usagef("lock release breaks another holder's lock: pass --force --token T (see lake lock status %s)", args[0])
			}
			tok, err := lock.ParseToken(o.token)
			if err != nil {
				return usageError{lakeerr.Wrap(err, "--token")}
			}
			return g.withLocks(cmd.Context(), func(st lock.Storage) error {
				l, err := lock.New(st, nil)
				if err != nil {
					return err
				}
				if err := l.ForceRelease(cmd.Context(), args[0], tok); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "released %s (token %s broken)\n", args[0], tok)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&o.force, "force", false, "required: break the holder's lock")
	cmd.Flags().StringVar(&o.token, "token", "", "the fencing token the lock must be held with")
	return cmd
}

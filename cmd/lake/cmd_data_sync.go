package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dsurl"
	"github.com/lakemeta/lake/internal/lakeerr"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/treesync"
	"github.com/spf13/cobra"
)

// dataSyncOptions are the flags common to sync, run and status.
type dataSyncOptions struct {
	dir, prefer       string
	models            []string
	lease, wait, skew time.Duration
	pushOnFailure     bool
	grace             time.Duration
}

func (o *dataSyncOptions) addFlags(cmd *cobra.Command, locking bool) {
	f := cmd.Flags()
	f.StringVarP(&o.dir, "dir", "C", ".", "the working directory synced")
	f.StringArrayVar(&o.models, "model", nil, "limit the sync to the model TYPE/ID (repeatable); a scoped pull never moves the unscoped position")
	if locking {
		f.StringVar(&o.prefer, "prefer", "", "decide conflicts: local (push over the remote) or remote (take the remote); default: refuse them")
		f.DurationVar(&o.lease, "lease", lock.DefaultLease, "lease of the lock")
		f.DurationVar(&o.wait, "wait", lock.DefaultWait, "how long to wait for the lock (exit 8 when it runs out)")
		f.DurationVar(&o.skew, "clock-skew", 0, "bound on clock skew; enables the faster takeover of a dead holder")
	}
}

func (o *dataSyncOptions) open(s *datastore.Store, namespace string) (*treesync.Tree, error) {
	switch o.prefer {
	case "", "local", "remote":
	default:
		return nil, usagef("--prefer must be local or remote, not %q", o.prefer)
	}
	return treesync.Open(o.dir, s, &treesync.Options{
		Namespace: namespace,
		Prefer:    treesync.Prefer(o.prefer),
		Lock:      &lock.Options{Lease: o.lease, Wait: o.wait, ClockSkew: o.skew},
	})
}

func printReport(w io.Writer, r treesync.Report) {
	lockPart := fmt.Sprintf("token %s, lock wait %s", r.Token, r.LockWait.Round(time.Millisecond))
	if r.Unlocked {
		lockPart = "no lock (nothing to push, pull or maintain)"
	}
	fmt.Fprintf(w, "%s: %d dirty, %d uploaded, %d stated; pulled %d changes in %d partitions: %d downloaded, %d removed; committed %d\n",
		lockPart, r.Dirty, r.Uploaded, r.Stated, r.Changes, r.Partitions, r.Downloaded, r.Removed, r.Committed)
	if r.CatalogRead+r.CatalogFolded+r.PrunedModels+r.PrunedVersions > 0 {
		fmt.Fprintf(w, "catalog: %d rows read, %d folded; lifecycle: %d models and %d versions pruned (%d files)\n",
			r.CatalogRead, r.CatalogFolded, r.PrunedModels, r.PrunedVersions, r.PrunedFiles)
	}
	for _, p := range r.Resolved {
		fmt.Fprintf(w, "conflict resolved: %s\n", p)
	}
}

// printSkipped writes the paths a sync left unsynced and its warnings, one
// line each, to w (stderr): "skipped PATH: WHY".
func printSkipped(w io.Writer, skipped []treesync.Skipped, warnings []string) {
	for _, s := range skipped {
		fmt.Fprintf(w, "lake: skipped %s: %s\n", s.Path, s.Why)
	}
	for _, m := range warnings {
		fmt.Fprintf(w, "lake: warning: %s\n", m)
	}
}

func newDataSyncCommand(g *globalOptions) *cobra.Command {
	var o dataSyncOptions
	cmd := &cobra.Command{
		Use:   "sync",
		Short: "Sync the working directory with the datastore: lock, pull, push, commit, release",
		Long: `Sync the directory --dir (default .) with the datastore of --store. The dirty
files (found by a walk against .lake/state.json: size, mtime, SHA-256; or the
hints of the Go API's MarkDirty) are uploaded first, invisibly; then, under the
lock NAMESPACE/sync, the dirty paths are checked against the remote with one
batch stat, the changes since the last sync are pulled (files written
atomically), and the dirty entries are committed in one commit fenced by the
lock's token, which the store refuses if the lock was lost. Only the changed
index entries are written.

A path changed both locally and remotely since the last sync is a conflict:
the sync is refused (exit 4) naming the paths, unless --prefer local|remote.
A path the tree cannot sync (a symbolic link, a remote entry under .lake or
with an invalid name from a foreign writer, a path that is a file on one side
and a directory on the other) is skipped and named on stderr with the way
out; everything else syncs, and the exit status is 9. A sync whose commit
stood but a step after it failed (the catalog fold, the lifecycle, saving its
state, releasing the lock) prints its report and exits 10: never redo it as if
refused; the next sync does the step again.
--model TYPE/ID limits the sync to models (a scoped pull moves only their
positions). See docs/sync.md.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// An unscoped sync opens the datastore with the layout the
			// tree remembers (no request); Sync reads the record before
			// anything that needs it, and a stale one is forgotten and
			// the sync started again, having done nothing (docs/sync.md).
			return o.openRemembered(cmd, g, func() bool { return true }, func(s *datastore.Store) error { return o.sync(cmd, g, s) })
		},
	}
	o.addFlags(cmd, true)
	return cmd
}

// openRemembered calls fn with the datastore opened with the layout o's
// tree remembers (an unscoped sync or run; a scoped one opens it as any
// command does), and, when fn returns datastore.ErrStaleLayout and again
// says it may, once more with it opened without: the tree forgot the stale
// layout, and the open reads the record.
func (o *dataSyncOptions) openRemembered(cmd *cobra.Command, g *globalOptions, again func() bool, fn func(*datastore.Store) error) error {
	var remembered *datastore.Layout
	if len(o.models) == 0 {
		remembered = treesync.RememberedLayout(o.dir)
	}
	opts := &dsurl.Options{Remembered: remembered}
	err := g.openData(cmd, opts, fn)
	if opts.Remembered != nil && errors.Is(err, datastore.ErrStaleLayout) && again() {
		opts.Remembered = nil
		return g.openData(cmd, opts, fn)
	}
	return err
}

// sync is `lake data sync` on s.
func (o *dataSyncOptions) sync(cmd *cobra.Command, g *globalOptions, s *datastore.Store) error {
	t, err := o.open(s, g.namespace)
	if err != nil {
		return err
	}
	rep, err := t.Sync(cmd.Context(), treesync.Scope{Models: o.models})
	printSkipped(cmd.ErrOrStderr(), rep.Skipped, rep.Warnings)
	if err != nil && !errors.Is(err, treesync.ErrPartial) && !errors.As(err, new(*treesync.AfterCommitError)) {
		return err
	}
	if errors.As(err, new(*treesync.AfterCommitError)) {
		printReport(cmd.OutOrStdout(), rep) // the commit stood: say what it did
		return err
	}
	printReport(cmd.OutOrStdout(), rep)
	return err // nil, or the skipped paths (exit 9)
}

func newDataRunCommand(g *globalOptions) *cobra.Command {
	var o dataSyncOptions
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD [ARG...]",
		Short: "Lock, pull, run CMD in the directory, push what it changed, commit, release",
		Long: `The seed's loop as one command: lock NAMESPACE/sync, pull the changes since the
last sync into --dir, run CMD there with the fencing token in its environment
(LAKE_FENCING_TOKEN, and LAKE_LOCK_NAME), then push what it changed and commit,
fenced, and release. lake exits with CMD's exit status (128+N if signal N ended
it). A failed CMD pushes nothing (its changes stay dirty locally) unless
--push-on-failure. If the lock is lost while CMD runs, CMD gets SIGTERM, then
SIGKILL after --grace, and nothing is committed. The report goes to stderr.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 || len(args) < 1 {
				return usagef("usage: %s", cmd.UseLine())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// As `lake data sync`: an unscoped run opens the datastore
			// with the layout the tree remembers; Run proves it before
			// CMD runs, and a stale one ends the run before CMD, which
			// is then started once, with the record read.
			ran := false
			return o.openRemembered(cmd, g, func() bool { return !ran }, func(s *datastore.Store) error {
				t, err := o.open(s, g.namespace)
				if err != nil {
					return err
				}
				var status error
				rep, err := t.Run(cmd.Context(), treesync.Scope{Models: o.models}, func(ctx context.Context, ls *lock.Lease) error {
					ran = true
					status = runInTree(ctx, t.Dir(), ls, args, o.grace)
					return status
				}, treesync.RunOptions{PushOnFailure: o.pushOnFailure})
				if !ran && errors.Is(err, datastore.ErrStaleLayout) {
					return err // before CMD: the caller runs again
				}
				printSkipped(cmd.ErrOrStderr(), rep.Skipped, rep.Warnings)
				if err != nil && !errors.Is(err, status) && !errors.Is(err, treesync.ErrPartial) {
					return err
				}
				printReport(cmd.ErrOrStderr(), rep)
				if status == nil {
					return err // nil, or the skipped paths (exit 9)
				}
				return status
			})
		},
	}
	o.addFlags(cmd, true)
	cmd.Flags().BoolVar(&o.pushOnFailure, "push-on-failure", false, "push what CMD changed even when it fails")
	cmd.Flags().DurationVar(&o.grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL when CMD must stop")
	return cmd
}

// runInTree runs argv in dir under the lease (lock.RunCommand); its exit
// status becomes an exitStatus error.
func runInTree(ctx context.Context, dir string, ls *lock.Lease, argv []string, grace time.Duration) error {
	c := exec.Command(argv[0], argv[1:]...)
	c.Dir = dir
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	stopped, err := lock.RunCommand(ctx, ls, c, grace)
	if c.ProcessState == nil {
		return err
	}
	if cerr := context.Cause(ctx); cerr != nil {
		return stoppedError(cerr, argv[0])
	}
	if stopped != nil {
		return stoppedError(stopped, argv[0])
	}
	return statusOf(c, err)
}

func newDataStatusCommand(g *globalOptions) *cobra.Command {
	var o dataSyncOptions
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show what is dirty locally and what changed remotely, without a lock",
		Long: `Show the dirty paths of --dir (added, modified, deleted since the last sync) and
the remote changes not yet pulled, reading only the feed's changes; a path in
both is marked CONFLICT; the paths a sync would skip are listed as
"skipped PATH WHY". Takes no lock and changes nothing.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withDataReader(cmd, func(s *datastore.Store) error {
				t, err := o.open(s, g.namespace)
				if err != nil {
					return err
				}
				st, err := t.Status(cmd.Context(), treesync.Scope{Models: o.models})
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				printSkipped(cmd.ErrOrStderr(), nil, st.Warnings)
				for _, sk := range st.Skipped {
					fmt.Fprintf(w, "skipped\t%s\t%s\n", sk.Path, sk.Why)
				}
				for _, c := range st.Local {
					fmt.Fprintf(w, "local\t%s\t%s\n", c.Kind, c.Path)
				}
				conflict := map[string]bool{}
				for _, p := range st.Conflicts {
					conflict[p] = true
				}
				for _, c := range st.Remote {
					kind := "changed"
					if c.Deleted {
						kind = "deleted"
					}
					mark := ""
					if conflict[c.Path] {
						mark = "\tCONFLICT"
					}
					fmt.Fprintf(w, "remote\t%s\t%s\t@%s/%d%s\n", kind, c.Path, c.Partition, c.Pos, mark)
				}
				return nil
			})
		},
	}
	o.addFlags(cmd, false)
	return cmd
}

// stoppedError is the error of a command stopped because its context ended
// with cause (the lock lost, an interrupt).
func stoppedError(cause error, name string) error {
	return lakeerr.Wrap(cause, "%s was stopped", name)
}

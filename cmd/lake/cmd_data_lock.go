package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dslock"
	"github.com/lakemeta/lake/internal/lakeerr"
	"github.com/lakemeta/lake/lock"
	"github.com/spf13/cobra"
)

// newDataLockCommand inspects and breaks the locks that live in the
// datastore (the sync locks NAMESPACE/sync), which `lake lock` (the
// metastore's locks) does not see.
func newDataLockCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Inspect and break the datastore's locks (NAMESPACE/sync of lake data sync and run)",
		Long: `The locks of lake data sync and lake data run live in the datastore's own records
(so that a commit is fenced in the same atomic write as its entries), not in the
metastore that lake lock shows. These commands are lake lock's status, ls and
release on them. See docs/sync.md and docs/locks.md.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var asJSON bool
	status := &cobra.Command{
		Use:   "status NAME",
		Short: "Show who holds the datastore lock NAME (NAMESPACE/sync), since when, and its token",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withDataLockReader(cmd, func(l *lock.Locker) error {
				info, err := l.Inspect(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(cmd.OutOrStdout()).Encode(info)
				}
				printInfo(cmd.OutOrStdout(), info)
				return nil
			})
		},
	}
	status.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	ls := &cobra.Command{
		Use:   "ls NAMESPACE",
		Short: "List the datastore locks of NAMESPACE",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withDataLockReader(cmd, func(l *lock.Locker) error {
				infos, err := l.List(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
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
	var o lockReleaseOptions
	release := &cobra.Command{
		Use:   "release NAME --force --token T",
		Short: "Break the datastore lock NAME held with token T; its holder commits nothing from then on",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !o.force {
				return usagef("lock release breaks another holder's lock: pass --force --token T (see lake data lock status %s)", args[0])
			}
			tok, err := lock.ParseToken(o.token)
			if err != nil {
				return usageError{lakeerr.Wrap(err, "--token")}
			}
			return g.withDataLocker(cmd, func(l *lock.Locker) error {
				if err := l.ForceRelease(cmd.Context(), args[0], tok); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "released %s (token %s broken)\n", args[0], tok)
				return nil
			})
		},
	}
	release.Flags().BoolVar(&o.force, "force", false, "required: break the holder's lock")
	release.Flags().StringVar(&o.token, "token", "", "the fencing token the lock must be held with")
	cmd.AddCommand(status, ls, release)
	return cmd
}

// withDataLocker opens the datastore of --store and runs fn with a locker
// over its lock records (the sync locks NAMESPACE/sync).
func (g *globalOptions) withDataLocker(cmd *cobra.Command, fn func(*lock.Locker) error) error {
	return g.withData(cmd, false, func(s *datastore.Store) error {
		l, err := lock.New(dslock.New(s), nil)
		if err != nil {
			return err
		}
		return fn(l)
	})
}

// withDataLockReader is withDataLocker for a command that only reads the
// lock records: a bolt file is opened read-only and keeps every byte.
func (g *globalOptions) withDataLockReader(cmd *cobra.Command, fn func(*lock.Locker) error) error {
	return g.withDataReader(cmd, func(s *datastore.Store) error {
		l, err := lock.New(dslock.New(s), nil)
		if err != nil {
			return err
		}
		return fn(l)
	})
}

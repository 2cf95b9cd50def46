package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/datastore/dslock"
	"github.com/lakemeta/lake/datastore/lifecycle"
	"github.com/lakemeta/lake/internal/lakeerr"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/metastore"
	"github.com/spf13/cobra"
)

func newDataNamespacesCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "namespaces",
		Short: "List the namespaces and their lifecycle policies",
		Long: `List every namespace of the datastore: "default" (the root) and each one that
ever committed, with its lifecycle policy (see ` + "`lake data lifecycle`" + `). Each
namespace has its own files, feeds, index and lock, so two never contend.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withDataReader(cmd, func(s *datastore.Store) error {
				nss, err := s.Namespaces(cmd.Context())
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "NAMESPACE\tLIFECYCLE\tKEEP-LAST\tRETENTION\tHORIZON\tCREATED")
				for _, n := range nss {
					fmt.Fprintf(w, "%s\t%s\n", n.Name, policyColumns(n))
				}
				return w.Flush()
			})
		},
	}
}

func policyColumns(n datastore.NamespaceConfig) string {
	on := "off"
	if n.Lifecycle.Enabled {
		on = "on"
	}
	created := "-"
	if !n.Created.IsZero() {
		created = n.Created.UTC().Format(time.RFC3339)
	}
	horizon := n.Lifecycle.Horizon
	if horizon == 0 {
		horizon = datastore.DefaultHorizon
	}
	return fmt.Sprintf("%s\t%d\t%s\t%s\t%s", on, n.Lifecycle.KeepLast, n.Lifecycle.Retention, horizon, created)
}

func newDataLifecycleCommand(g *globalOptions) *cobra.Command {
	var enable, disable bool
	var keepLast int
	var retention, horizon time.Duration
	cmd := &cobra.Command{
		Use:   "lifecycle",
		Short: "Show or set the lifecycle policy of --namespace",
		Long: `Show the lifecycle policy of --namespace, or change the parts named by flags.

A policy names what is done: the data of a model whose definition
(data/TYPE/ID/model.yaml) was deleted at least --retention ago (orphaned), and
the versions of each data entry of a model beyond the newest --keep-last
(0 keeps all). With --enable, every sync in the namespace expires what the
policy names on its own, under the namespace's lock, and purges tombstones
older than --horizon (default 7 days) at most every quarter of it; without
it only ` + "`lake data prune --apply`" + ` deletes. Nothing live is ever pruned: a
model with a definition loses only versions beyond --keep-last, and data that
never had a definition is never orphaned.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if enable && disable {
				return usagef("--enable and --disable exclude each other")
			}
			if keepLast < 0 || retention < 0 || horizon < 0 {
				return usagef("--keep-last, --retention and --horizon must not be negative")
			}
			return g.withNamespace(cmd, func(ns *datastore.Store) error {
				ctx := cmd.Context()
				c, err := ns.Config(ctx)
				if err != nil {
					return err
				}
				f := cmd.Flags()
				if f.NFlag() > 0 && (enable || disable || f.Changed("keep-last") || f.Changed("retention") || f.Changed("horizon")) {
					p := c.Lifecycle
					if enable {
						p.Enabled = true
					}
					if disable {
						p.Enabled = false
					}
					if f.Changed("keep-last") {
						p.KeepLast = keepLast
					}
					if f.Changed("retention") {
						p.Retention = retention
					}
					if f.Changed("horizon") {
						p.Horizon = horizon
					}
					if c, err = ns.SetLifecycle(ctx, p); err != nil {
						return err
					}
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "NAMESPACE\tLIFECYCLE\tKEEP-LAST\tRETENTION\tHORIZON\tCREATED")
				fmt.Fprintf(w, "%s\t%s\n", c.Name, policyColumns(c))
				return w.Flush()
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&enable, "enable", false, "let every sync expire what the policy names")
	f.BoolVar(&disable, "disable", false, "stop syncs from expiring anything (prune --apply still does)")
	f.IntVar(&keepLast, "keep-last", 0, "versions of each data entry kept (0: all)")
	f.DurationVar(&retention, "retention", 0, "how long a deleted model's data is kept before it can be pruned")
	f.DurationVar(&horizon, "horizon", 0, "how long tombstones stay before the lifecycle's reclaim purges them (0: 7 days)")
	return cmd
}

// lockOptions are the flags of a command that takes the namespace's lock.
type lockOptions struct{ lease, wait, skew time.Duration }

func (o *lockOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().DurationVar(&o.lease, "lease", lock.DefaultLease, "lease of the namespace's lock")
	cmd.Flags().DurationVar(&o.wait, "wait", lock.DefaultWait, "how long to wait for the lock (exit 8 when it runs out)")
	cmd.Flags().DurationVar(&o.skew, "clock-skew", 0, "bound on clock skew; enables the faster takeover of a dead holder")
}

// underLock runs fn holding the namespace's lock NAMESPACE/sync, with its
// fence for the writes.
func (o *lockOptions) underLock(ctx context.Context, ns *datastore.Store, fn func(fence *datastore.Fence) error) error {
	l, err := lock.New(dslock.New(ns.Root()), &lock.Options{Lease: o.lease, Wait: o.wait, ClockSkew: o.skew})
	if err != nil {
		return err
	}
	ls, err := l.Acquire(ctx, ns.NamespaceName()+"/sync")
	if err != nil {
		return err
	}
	defer ls.Release(context.WithoutCancel(ctx))
	if ls.TookOver() {
		// A broken holder may still land a commit: fence first (S3).
		if _, err := ns.FenceTakeover(ctx, dslock.Fence(ls)); err != nil {
			return err
		}
	}
	if err := fn(dslock.Fence(ls)); err != nil {
		return err
	}
	if err := ls.Release(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, lock.ErrLost) {
		return err
	}
	return nil
}

func newDataModelCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "model",
		Short: "Manage models: a model TYPE/ID is data/TYPE/ID/…, defined by data/TYPE/ID/model.yaml",
		Long: `A model TYPE/ID is the partition data/TYPE/ID/…; its definition is the file
data/TYPE/ID/model.yaml (write it with ` + "`lake data put`" + ` or a sync). Deleting the
definition orphans the model's data, which the lifecycle prunes (see
` + "`lake data prune`" + ` and ` + "`lake data lifecycle`" + `).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var o lockOptions
	rm := &cobra.Command{
		Use:   "rm TYPE/ID",
		Short: "Delete a model's definition; its data stays, orphaned, for the lifecycle",
		Long: `Delete the definition data/TYPE/ID/model.yaml of the model TYPE/ID in --namespace,
under the namespace's lock NAMESPACE/sync (the commit is fenced by it), and
fold the change into the catalog, where the model is now orphaned. Its data
stays until ` + "`lake data prune --apply`" + ` or a sync with the lifecycle enabled
removes it after the namespace's retention. A model without a definition
exits 3.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			model := args[0]
			if err := datastore.ValidatePartition(model); err != nil || !isModel(model) {
				return usagef("%q is not a model TYPE/ID", model)
			}
			return g.withNamespace(cmd, func(ns *datastore.Store) error {
				ctx := cmd.Context()
				return o.underLock(ctx, ns, func(fence *datastore.Fence) error {
					out, err := ns.Commit(ctx, fence, []datastore.Entry{{Delete: catalog.DefinitionPath(model)}})
					if err != nil {
						return err
					}
					if len(out) == 0 {
						return fmt.Errorf("%w: model %s has no definition (%s) in namespace %s", metastore.ErrNotFound, model, catalog.DefinitionPath(model), ns.NamespaceName())
					}
					if _, err := catalog.Fold(ctx, ns, fence); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "model %s deleted in namespace %s: its data is orphaned\n", model, ns.NamespaceName())
					return nil
				})
			})
		},
	}
	o.addFlags(rm)
	cmd.AddCommand(rm)
	return cmd
}

func isModel(p string) bool { return strings.Contains(p, "/") }

func newDataPruneCommand(g *globalOptions) *cobra.Command {
	var apply bool
	var keepLast int
	var retention time.Duration
	var o lockOptions
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "List what the lifecycle policy lets go in --namespace; delete it with --apply",
		Long: `List what the lifecycle policy of --namespace lets go, one line each (kind,
namespace, model or model entry/version, files, bytes, why), from the
catalog as the last sync or model rm left it:
  drop-model      a model whose definition was deleted at least the retention
                  ago: its whole partition (files, feed, head, registry entry)
                  and its catalog row go, so nothing about it outlives it;
  delete-version  a version of a live model's data entry beyond the newest
                  --keep-last.
Without --apply nothing is deleted and no lock is taken. With --apply, under
the namespace's lock, the catalog is brought up to date, the plan is made
again and carried out, each write fenced by the lock; a model defined again
since is skipped. --keep-last and --retention override the namespace's policy
for this run. Nothing live is ever pruned.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if keepLast < 0 || retention < 0 {
				return usagef("--keep-last and --retention must not be negative")
			}
			return g.withNamespace(cmd, func(ns *datastore.Store) error {
				ctx := cmd.Context()
				c, err := ns.Config(ctx)
				if err != nil {
					return err
				}
				p := c.Lifecycle
				if cmd.Flags().Changed("keep-last") {
					p.KeepLast = keepLast
				}
				if cmd.Flags().Changed("retention") {
					p.Retention = retention
				}
				out := cmd.OutOrStdout()
				if !apply {
					actions, _, err := lifecycle.PlanNamespace(ctx, ns, &p, ns.Now())
					if err != nil {
						return err
					}
					printActions(out, actions)
					fmt.Fprintf(cmd.ErrOrStderr(), "%d to prune in namespace %s; nothing was deleted (run with --apply to delete)\n", len(actions), ns.NamespaceName())
					return nil
				}
				return o.underLock(ctx, ns, func(fence *datastore.Fence) error {
					if _, err := catalog.Fold(ctx, ns, fence); err != nil {
						return err
					}
					actions, _, err := lifecycle.PlanNamespace(ctx, ns, &p, ns.Now())
					if err != nil {
						return err
					}
					printActions(out, actions)
					st, err := lifecycle.Apply(ctx, ns, fence, actions)
					if err != nil {
						return err
					}
					if st.Versions > 0 {
						if _, err := catalog.Fold(ctx, ns, fence); err != nil {
							return err
						}
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "pruned in namespace %s: %d models, %d versions, %d files, %d bytes; %d skipped (no longer due)\n",
						ns.NamespaceName(), st.Models, st.Versions, st.Files, st.Bytes, st.Skipped)
					return nil
				})
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&apply, "apply", false, "delete what is listed (under the namespace's lock)")
	f.IntVar(&keepLast, "keep-last", 0, "versions of each data entry kept (overrides the policy; 0: all)")
	f.DurationVar(&retention, "retention", 0, "how long a deleted model's data is kept (overrides the policy)")
	o.addFlags(cmd)
	return cmd
}

func printActions(w io.Writer, actions []lifecycle.Action) {
	for _, a := range actions {
		fmt.Fprintln(w, a.String())
	}
}

func newDataCatalogCommand(g *globalOptions) *cobra.Command {
	var all, asJSON bool
	var since string
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "Print the catalog: every model of --namespace (or --all), or what changed --since a cursor",
		Long: `Print the catalog's rows, one model a line: namespace, model, state (live,
orphaned, undefined), files, bytes, created, deleted; --json prints each row
as JSON with its entries and versions. Rows are kept up to date by each sync
(and model rm, prune) in the namespace.

Without --since the rows of --namespace are read whole (--all: of every
namespace). With --since CURSOR only the rows changed since CURSOR are read,
in every namespace, at a cost that grows with what changed; "removed" lines
name pruned models. --since "" starts from the beginning. The next cursor is
printed on stderr. Either way each entry left out because no lake client
writes it (a foreign writer's) is named on stderr: "lake: skipped ENTRY: why".`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withData(cmd, false, func(s *datastore.Store) error {
				ctx := cmd.Context()
				out := cmd.OutOrStdout()
				if cmd.Flags().Changed("since") {
					var c catalog.Cursor
					if since != "" {
						b, err := base64.RawURLEncoding.DecodeString(since)
						if err != nil || json.Unmarshal(b, &c) != nil {
							return usagef("--since: %q is not a catalog cursor", since)
						}
					}
					ch, next, err := catalog.Read(ctx, s, c)
					if err != nil {
						return err
					}
					printCatalogSkips(cmd.ErrOrStderr(), ch.Skipped)
					for _, c := range ch.Changes {
						if c.Removed {
							fmt.Fprintf(out, "removed\t%s\t%s\n", c.Namespace, c.Model)
							continue
						}
						if err := printRow(out, c.Row, asJSON, "changed\t"); err != nil {
							return err
						}
					}
					b, _ := json.Marshal(next)
					fmt.Fprintf(cmd.ErrOrStderr(), "next cursor: %s\n", base64.RawURLEncoding.EncodeToString(b))
					return nil
				}
				nsName := ""
				if !all {
					if err := datastore.ValidateNamespace(g.namespace); err != nil {
						return usageError{lakeerr.Wrap(err, "--namespace")}
					}
					nsName = g.namespace
				}
				rows, skipped, err := catalog.All(ctx, s, nsName)
				if err != nil {
					return err
				}
				printCatalogSkips(cmd.ErrOrStderr(), skipped)
				for _, r := range rows {
					if err := printRow(out, r, asJSON, ""); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&all, "all", false, "every namespace's rows")
	f.BoolVar(&asJSON, "json", false, "print rows as JSON lines")
	f.StringVar(&since, "since", "", "print only the rows changed since this cursor (\"\" for all)")
	return cmd
}

func printRow(w io.Writer, r catalog.Row, asJSON bool, prefix string) error {
	if asJSON {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s%s\n", prefix, b)
		return err
	}
	deleted := "-"
	if !r.Deleted.IsZero() {
		deleted = r.Deleted.UTC().Format(time.RFC3339)
	}
	_, err := fmt.Fprintf(w, "%s%s\t%s\t%s\t%d\t%d\t%s\t%s\n", prefix, r.Namespace, r.Model, r.State, r.Files, r.Bytes,
		r.Created.UTC().Format(time.RFC3339), deleted)
	return err
}

// printCatalogSkips names the catalog entries a read left out, as a sync
// names what it skipped (printSkipped).
func printCatalogSkips(w io.Writer, skipped []catalog.Skip) {
	for _, s := range skipped {
		fmt.Fprintf(w, "lake: skipped %s\n", s)
	}
}

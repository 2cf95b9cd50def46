package main

import (
	"time"

	"github.com/lakemeta/lake/bench"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/spf13/cobra"
)

func newBenchSyncLoopCommand(g *globalOptions) *cobra.Command {
	var o bench.SyncLoopOptions
	cmd := &cobra.Command{
		Use:   "sync-loop",
		Short: "Run seed 004's loop with workers in namespaces and print what a sync costs and what lake keeps",
		Long: `Run seed 004's loop on the datastore of --store (which must hold no files; on
DynamoDB it creates TABLE_files): --workers workers at once, each in its own
directory, --iterations times each. An iteration creates the disposable model
bench/wW-iI (its definition data/bench/wW-iI/model.yaml and --files data
files) with the sequence of ` + "`lake data run`" + ` (lock, pull, work, push, commit,
release), then deletes the definition and syncs. --namespaces 1 puts every
worker in one namespace (one lock, one index); by default each worker has its
own. --lifecycle enables each namespace's lifecycle (retention 0, horizon
--horizon), so the syncs prune the deleted models themselves.

At --reports points it stops the workers between iterations and prints: the
iterations done, syncs per second, the lock wait per sync (mean, max), on
DynamoDB the requests and items read and written per sync, and the size of
what lake keeps: catalog rows, catalog feed entries (rows and tombstones),
registered partitions, feed entries (live files and tombstones) and live
files. See docs/lifecycle.md.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withData(cmd, true, func(s *datastore.Store) error {
				if p, err := s.List(cmd.Context(), "", 1, ""); err != nil {
					return err
				} else if len(p.Files) > 0 || p.Cursor != "" {
					return usagef("bench sync-loop needs a datastore without files (%s holds some)", g.store)
				}
				if o.Workers < 1 || o.Iterations < 1 || o.Files < 1 || o.Namespaces < 0 || o.Reports < 1 {
					return usagef("--workers, --iterations, --files and --reports must be at least 1")
				}
				if d, ok := s.Driver().(*dynamofs.Driver); ok {
					o.Cost = func() bench.Cost {
						st := d.Stats()
						return bench.Cost{Requests: st.TotalRequests(), ItemsRead: st.ItemsRead, ItemsWritten: st.ItemsWritten}
					}
				}
				return bench.SyncLoop(cmd.Context(), cmd.OutOrStdout(), s, o)
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Workers, "workers", 10, "workers running the loop at once")
	f.IntVar(&o.Namespaces, "namespaces", 0, "namespaces the workers are spread over (1: all in one; default: one each)")
	f.IntVar(&o.Iterations, "iterations", 100, "iterations of the loop per worker")
	f.IntVar(&o.Files, "files", 5, "data files each iteration writes")
	f.BoolVar(&o.Lifecycle, "lifecycle", false, "enable the namespaces' lifecycle: syncs prune the deleted models")
	f.IntVar(&o.Reports, "reports", 10, "rows printed over the run")
	f.DurationVar(&o.Horizon, "horizon", 20*time.Second, "the lifecycle's tombstone horizon (how long pruned models' catalog tombstones stay)")
	return cmd
}

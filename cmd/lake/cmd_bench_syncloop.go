package main

import (
	"github.com/lakemeta/lake/bench"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/spf13/cobra"
)

func newBenchSyncLoopCommand(g *globalOptions) *cobra.Command {
	var o bench.SyncLoopOptions
	cmd := &cobra.Command{
		Use:   "sync-loop",
		Short: "Run seed 004's loop through the sync engine and print what each sync commits and reads",
		Long: `Run seed 004's loop --iterations times with two workers taking turns on the
datastore of --store (which must hold no files; on DynamoDB it creates
TABLE_files): each iteration creates a disposable model (its definition and
--files data files) with the sequence of ` + "`lake data run`" + ` (lock, pull, work, push,
commit, release), then deletes its definition and syncs. For iterations 1, 10,
100, 350 and 1000 it prints, per sync: the files the sync changed, the index
entries it committed, the feed entries its pull read, the files it downloaded,
the live files of the namespace, and on DynamoDB the requests and items read.
See docs/sync.md.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withData(cmd, true, func(s *datastore.Store) error {
				if p, err := s.List(cmd.Context(), "", 1, ""); err != nil {
					return err
				} else if len(p.Files) > 0 || p.Cursor != "" {
					return usagef("bench sync-loop needs a datastore without files (%s holds some)", g.store)
				}
				if d, ok := s.Driver().(*dynamofs.Driver); ok {
					o.Cost = func() (int64, int64) {
						st := d.Stats()
						return st.TotalRequests(), st.ItemsRead
					}
				}
				return bench.SyncLoop(cmd.Context(), cmd.OutOrStdout(), s, o)
			})
		},
	}
	cmd.Flags().IntVar(&o.Iterations, "iterations", 1000, "iterations of the loop")
	cmd.Flags().IntVar(&o.Files, "files", 5, "data files each iteration writes")
	return cmd
}

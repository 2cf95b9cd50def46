package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/lakemeta/lake/bench"
	"github.com/spf13/cobra"
)

func newBenchProcessLoopCommand(g *globalOptions) *cobra.Command {
	var o bench.ProcessLoopConfig
	cmd := &cobra.Command{
		Use:   "process-loop",
		Short: "Run seed 004's loop with every sync a new lake process, and print requests per sync over time",
		Long: `Run seed 004's loop as its workers did: every sync is a new ` + "`lake data sync`" + `
process (so nothing a process keeps in memory helps the next one), with the
catalog and each namespace's lifecycle on (retention 0, --horizon), for
--duration. Each of --workers workers has its own directory and namespace
(bench-wN); an iteration writes the model bench/wN-iI (its model.yaml and
--files data files), syncs, deletes the model's definition and syncs again,
so the lifecycle prunes it and its catalog rows, and reclaims.

Each worker's processes reach the store through their own counting proxy
(the store's endpoint comes from AWS_ENDPOINT_URL_S3 for s3:// or
AWS_ENDPOINT_URL_DYNAMODB for dynamodb://, and must not be in the URL), so
each sync's requests are counted on the wire. It prints, at --reports points,
the syncs of that interval and their requests (mean, max) and seconds
(mean), then the mean of the first tenth of the syncs against the last
tenth: flat means what each sync reads does not grow with the run (issue
28, row 6: compaction's record of what it read is kept in the store).
The store should be a fresh one. See docs/s3.md.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Workers < 1 || o.Files < 1 || o.Reports < 1 || o.Duration <= 0 {
				return usagef("--workers, --files and --reports must be at least 1, --duration positive")
			}
			env := ""
			switch {
			case strings.HasPrefix(g.store, "s3://"):
				env = "AWS_ENDPOINT_URL_S3"
			case strings.HasPrefix(g.store, "dynamodb://"):
				env = "AWS_ENDPOINT_URL_DYNAMODB"
			default:
				return usagef("bench process-loop needs an s3:// or dynamodb:// store (it counts requests with a proxy before the store's endpoint)")
			}
			if strings.Contains(g.store, "endpoint=") || os.Getenv(env) == "" {
				return usagef("bench process-loop takes the store's endpoint from %s (set it; no endpoint= in the URL)", env)
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("lake: %v", err)
			}
			o.Self, o.Store, o.Env = self, g.store, env
			return bench.RunProcessLoop(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Workers, "workers", 4, "workers running the loop at once, each in its own namespace")
	f.IntVar(&o.Files, "files", 5, "data files each iteration writes")
	f.IntVar(&o.Reports, "reports", 10, "rows printed over the run")
	f.DurationVar(&o.Duration, "duration", 5*time.Minute, "how long the loop runs")
	f.DurationVar(&o.Horizon, "horizon", 20*time.Second, "the lifecycle's tombstone horizon")
	return cmd
}

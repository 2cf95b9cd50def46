package main

import (
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/lakemeta/lake/bench"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/storeurl"
	"github.com/spf13/cobra"
)

type benchLockOptions struct {
	ops, runs, workers    int
	lease, skew, duration time.Duration
	keep                  bool
}

func newBenchLockCommand(g *globalOptions) *cobra.Command {
	var o benchLockOptions
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Measure lock acquire/release against a raw PutItem, takeover time and contention",
		Long: `Create the table named by --store (dynamodb://TABLE[?layout=v1|v2]; TABLE,
TABLE_prefix_v2 and TABLE_raw must not exist) and measure, in one run:

  uncontended    --ops acquire/release pairs of one lock by one process,
                 interleaved with as many conditional PutItems made with the raw
                 SDK on TABLE_raw: requests, write units, p50 and p99 latency
                 (and the first acquisition by a process that has not seen the
                 lock, which reads it once first);
  takeover       a holder process (this binary, lake lock run) is killed with
                 SIGKILL after renewing; a waiter starting at the kill takes it
                 over, --runs times with a clock-skew bound (--clock-skew) and
                 --runs times observing the lock unchanged for a full lease,
                 the safe default of the field's lock clients (the baseline);
  throughput     --workers workers acquiring, writing once through the lock
                 and releasing, for --duration: all on one lock, then each on a
                 lock of its own namespace.

The tables are deleted at the end unless --keep.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !strings.HasPrefix(g.store, "dynamodb://") {
				return usagef("bench lock needs --store dynamodb://TABLE")
			}
			api, opts, err := storeurl.DynamoAPI(cmd.Context(), g.store)
			if err != nil {
				return err
			}
			for _, name := range []string{opts.Table, opts.Table + dynamostore.V2Suffix, opts.Table + "_raw"} {
				if err := mustNotExist(cmd.Context(), api, name); err != nil {
					return err
				}
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			layout := opts.Layout
			if layout == dynamostore.LayoutAuto {
				layout = dynamostore.LayoutV1
			}
			res, err := bench.RunLock(cmd.Context(), api, bench.LockConfig{
				Table: opts.Table, Layout: layout, Ops: o.ops, Lease: o.lease, Skew: o.skew, Runs: o.runs,
				Workers: o.workers, Duration: o.duration, Keep: o.keep,
				Holder: func(name string, lease time.Duration) *exec.Cmd {
					c := exec.Command(self, "--store", g.store, "lock", "run", name, "--lease", lease.String(), "--", "sleep", "3600")
					c.Stderr = cmd.ErrOrStderr()
					return c
				},
			}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return bench.PrintLock(cmd.OutOrStdout(), res)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.ops, "ops", 300, "uncontended acquire/release pairs (and raw PutItems)")
	f.DurationVar(&o.lease, "lease", 2*time.Second, "lease of the takeover runs")
	f.DurationVar(&o.skew, "clock-skew", 100*time.Millisecond, "clock-skew bound of the skew-bounded waiter")
	f.IntVar(&o.runs, "runs", 3, "takeovers per mode")
	f.IntVar(&o.workers, "workers", 10, "workers of the throughput runs")
	f.DurationVar(&o.duration, "duration", 5*time.Second, "length of each throughput run")
	f.BoolVar(&o.keep, "keep", false, "keep the tables after the run")
	return cmd
}

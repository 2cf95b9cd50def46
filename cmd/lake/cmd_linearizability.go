package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/workload"
	"github.com/lakemeta/lake/storeurl"
	"github.com/spf13/cobra"
)

type linOptions struct {
	seeds     string
	clients   int
	ops       int
	faultRate float64
	attempts  int
	out       string
	timeout   time.Duration
}

func newBenchLinearizabilityCommand(g *globalOptions) *cobra.Command {
	var o linOptions
	cmd := &cobra.Command{
		Use:   "linearizability",
		Short: "Check recorded histories for linearizability across a live migration, with faults",
		Long: `For each seed: create a fresh v1 table (TABLE_s<seed>, named from --store
dynamodb://TABLE?endpoint=URL; the endpoint is required, a fault proxy is put
in front of it), run --clients clients doing --ops random contract operations
each (get, put, CAS, create-if-absent, delete-if-equals, guarded mutate) on a
few key groups while the migration walks v1 → dual → backfill → verify →
finalize with client restarts, inject --fault-rate faults on the wire (delay,
dropped request, dropped response after forwarding, reset, 500, throttling,
transaction conflict), and check the history with porcupine. A failing
history and its HTML visualisation are saved into --out. Exit code 1 if any
history is not linearizable.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := storeurl.ParseDynamo(strings.TrimPrefix(g.store, "dynamodb://"))
			if err != nil || !strings.HasPrefix(g.store, "dynamodb://") {
				return usagef("bench linearizability needs --store dynamodb://TABLE?endpoint=URL")
			}
			if t.Endpoint == "" {
				return usagef("bench linearizability puts a fault proxy in front of the endpoint: give ?endpoint=URL (DynamoDB Local)")
			}
			if o.clients < 1 || o.ops < 1 || o.faultRate < 0 || o.faultRate > 0.9 || o.attempts < 1 {
				return usagef("need --clients ≥ 1, --ops ≥ 1, --attempts ≥ 1 and 0 ≤ --fault-rate ≤ 0.9")
			}
			var seeds []uint64
			for _, f := range strings.Split(o.seeds, ",") {
				n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
				if err != nil {
					return usagef("--seeds: %q is not a number", f)
				}
				seeds = append(seeds, n)
			}
			cfg, err := ddb.LoadConfig(cmd.Context(), t.Region)
			if err != nil {
				return err
			}
			failed := 0
			for _, seed := range seeds {
				rep, err := workload.RunMigration(cmd.Context(), workload.MigrationRun{
					AWS: cfg, Endpoint: t.Endpoint, Table: fmt.Sprintf("%s_s%d", t.Table, seed), Seed: seed,
					Clients: o.clients, Ops: o.ops, FaultRate: o.faultRate, Attempts: o.attempts, OutDir: o.out, CheckTimeout: o.timeout,
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "seed %d: %s\n", seed, rep.Summary())
				if rep.Check.Verdict != porcupine.Ok {
					failed++
					fmt.Fprintf(cmd.OutOrStdout(), "  history: %s\n  visualisation: %s\n", rep.Check.History, rep.Check.Visualization)
				}
			}
			if failed > 0 {
				return fmt.Errorf("lake: %d of %d histories are not linearizable", failed, len(seeds))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.seeds, "seeds", "1,2,3", "comma-separated seeds, one run each")
	cmd.Flags().IntVar(&o.clients, "clients", 8, "concurrent clients")
	cmd.Flags().IntVar(&o.ops, "ops", 250, "operations per client")
	cmd.Flags().Float64Var(&o.faultRate, "fault-rate", 0.06, "fraction of requests that get a fault, spread over every kind")
	cmd.Flags().IntVar(&o.attempts, "attempts", 10, "attempts per client operation; few attempts under many faults leave outcomes unknown")
	cmd.Flags().StringVar(&o.out, "out", "lake-lincheck", "folder for failing histories and their visualisations")
	cmd.Flags().DurationVar(&o.timeout, "check-timeout", 5*time.Minute, "bound on the linearizability check of one history")
	return cmd
}

package main

import (
	"strconv"
	"strings"

	"github.com/lakemeta/lake/bench"
	"github.com/lakemeta/lake/datastore/dynamofs"
	"github.com/lakemeta/lake/storeurl"
	"github.com/spf13/cobra"
)

type benchDataFeedOptions struct {
	history                  string
	models, changes, workers int
	keep                     bool
}

func newBenchDataFeedCommand(g *globalOptions) *cobra.Command {
	var o benchDataFeedOptions
	cmd := &cobra.Command{
		Use:   "datafeed",
		Short: "Measure a datastore pull of the last changes against the seed's GSI feed and its quick patch",
		Long: `Create the tables TABLE_files (the datastore) and TABLE_gsifeed (the design seed
004 started from: one GSI partition "FILE" for every file) named by --store
(dynamodb://TABLE; both must not exist), fill both with the same history of H
changes across --models models, in steps, and at each H measure:

  one model        --changes fresh changes of one model, pulled from its position
  nothing changed  an unscoped pull (every model) when nothing changed
  all models       --changes fresh changes, each in another model, pulled unscoped

on the datastore, on the seed's design (the whole GSI partition read, changes
filtered client-side) and on its quick patch (the same query with a
FilterExpression on updatedAt). Prints requests, items read (ScannedCount; the
items of point and batch reads), changes found, read capacity units and wall
time. The tables are deleted at the end unless --keep.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var sizes []int
			for _, f := range strings.Split(o.history, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil || n < 0 || (len(sizes) > 0 && n <= sizes[len(sizes)-1]) {
					return usagef("--history: want increasing non-negative numbers, got %q", o.history)
				}
				sizes = append(sizes, n)
			}
			if o.models < 1 || o.changes < 1 || o.workers < 1 || o.workers > 64 {
				return usagef("need --models ≥ 1, --changes ≥ 1 and 1 ≤ --workers ≤ 64")
			}
			if !strings.HasPrefix(g.store, "dynamodb://") {
				return usagef("bench datafeed needs --store dynamodb://TABLE")
			}
			api, opts, err := storeurl.DynamoAPI(cmd.Context(), g.store)
			if err != nil {
				return err
			}
			for _, name := range []string{opts.Table + dynamofs.TableSuffix, opts.Table + bench.GSIFeedSuffix} {
				if err := mustNotExist(cmd.Context(), api, name); err != nil {
					return err
				}
			}
			rows, err := bench.RunDataFeed(cmd.Context(), api, bench.DataFeedConfig{Table: opts.Table, History: sizes,
				Models: o.models, Changes: o.changes, Workers: o.workers, Keep: o.keep}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return bench.PrintFeedRows(cmd.OutOrStdout(), rows)
		},
	}
	cmd.Flags().StringVar(&o.history, "history", "1000,10000", "comma-separated, increasing history sizes H (the docs' figures: 1000,10000,100000)")
	cmd.Flags().IntVar(&o.models, "models", 100, "models M the history is spread across")
	cmd.Flags().IntVar(&o.changes, "changes", 10, "fresh changes each pull finds")
	cmd.Flags().IntVar(&o.workers, "workers", 8, "concurrent writers filling the history")
	cmd.Flags().BoolVar(&o.keep, "keep", false, "keep the tables after the run")
	return cmd
}

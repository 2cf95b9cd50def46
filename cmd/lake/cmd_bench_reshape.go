package main

import (
	"strings"

	"github.com/lakemeta/lake/bench"
	"github.com/lakemeta/lake/sweep"
	"github.com/spf13/cobra"
)

type benchReshapeOptions struct {
	comments, segments, pageSize int
	keep                         bool
	endpoint, region             string
}

func newBenchReshapeCommand(g *globalOptions) *cobra.Command {
	var o benchReshapeOptions
	cmd := &cobra.Command{
		Use:   "reshape",
		Short: "Measure the reshape sweep's items/s against a raw Scan, and its capacity per item",
		Long: `Create the demo table TABLE named by --store (dynamodb://TABLE; it must not exist)
with about --comments old comments, add the demo spec's index, and time, with the
same --segments and --page-size: a raw parallel Scan of the table (the ceiling of
any sweep), apply's sweep (one conditional UpdateItem per comment, each also
writing the index), apply again (nothing left to write) and verify. Prints items
per second of each pass, its ratio to the raw Scan, and the write capacity units
DynamoDB reported per written item (table and index). The table is deleted at the
end unless --keep.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !strings.HasPrefix(g.store, "dynamodb://") {
				return usagef("bench reshape needs --store dynamodb://TABLE")
			}
			if o.comments < 1 {
				return usagef("--comments must be at least 1")
			}
			ro := reshapeOptions{endpoint: o.endpoint, region: o.region}
			c, table, err := ro.client(cmd.Context(), g)
			if err != nil {
				return err
			}
			if err := mustNotExist(cmd.Context(), c, table); err != nil {
				return err
			}
			res, err := bench.RunReshape(cmd.Context(), c, bench.ReshapeConfig{Table: table, Comments: o.comments, Segments: o.segments, PageSize: o.pageSize, Keep: o.keep}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return bench.PrintReshape(cmd.OutOrStdout(), res)
		},
	}
	cmd.Flags().IntVar(&o.comments, "comments", 20000, "old comments in the table (rounded up to 200s)")
	cmd.Flags().IntVar(&o.segments, "segments", sweep.DefaultSegments, "parallel scan segments of every pass")
	cmd.Flags().IntVar(&o.pageSize, "page-size", sweep.DefaultPageSize, "items evaluated per Scan request")
	cmd.Flags().BoolVar(&o.keep, "keep", false, "keep the table after the run")
	cmd.Flags().StringVar(&o.endpoint, "endpoint", "", "DynamoDB endpoint URL (default: --store's, else the AWS configuration's)")
	cmd.Flags().StringVar(&o.region, "region", "", "AWS region (default: --store's, else the AWS configuration's)")
	return cmd
}

package main

import (
	"strings"

	"github.com/lakemeta/lake/bench"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/storeurl"
	"github.com/spf13/cobra"
)

type benchCompareOptions struct {
	ops, records, pageSize, segments int
	keep                             bool
	serverPID                        int
}

func newBenchCompareCommand(g *globalOptions) *cobra.Command {
	var o benchCompareOptions
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "Measure lake against the raw AWS SDK, operation by operation, in every layout and migration state",
		Long: `Create the v1 table TABLE named by --store (dynamodb://TABLE; TABLE,
TABLE_prefix_v2, TABLE_rawcopy, TABLE_rawtx and TABLE_solo_prefix_v2 must not
exist), load
--records records, walk the migration v1 → dual → backfill → verify → finalize
→ retire-v1, and in each state (and on a standalone v2 table) measure --ops
of each operation through lake and through the raw aws-sdk-go-v2 on the same
table, each lake operation followed by its raw counterpart:

  point read        Get                 GetItem, strongly consistent
  create if absent  CAS(absent)         PutItem if attribute_not_exists(pk)
  CAS               CAS(value)          PutItem if v = expected
  delete            Delete(value)       DeleteItem if v = expected

Prints p50 and p99 latency of both, their p50 ratio, capacity units of both
and their ratio, and lake's requests per operation beside the minimum (the
raw SDK's: one request does each step) and their ratio; then the backfill of the records against a raw copy
of them (Scan + BatchWriteItem, no conditions: the practical ceiling) and
against the raw SDK doing the backfill's conditioned work (the same segments,
pages and transactions: what DynamoDB itself costs for it), in items per
second. The tables are deleted at the end unless --keep.

With --server-pid PID (the DynamoDB server's process on this machine, such
as scripts/dynamodb-local status names), it also prints each copy's CPU per
item, the server's (from /proc, Linux) and this process's, as a markdown
table. The server's counts all of its work meanwhile: on a server that other
clients use too, it is an upper bound.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !strings.HasPrefix(g.store, "dynamodb://") {
				return usagef("bench compare needs --store dynamodb://TABLE")
			}
			if o.ops < 2 || o.records < 0 || o.pageSize < 1 || o.segments < 1 || o.serverPID < 0 {
				return usagef("need --ops ≥ 2, --records ≥ 0, --page-size ≥ 1, --segments ≥ 1 and --server-pid ≥ 0")
			}
			api, opts, err := storeurl.DynamoAPI(cmd.Context(), g.store)
			if err != nil {
				return err
			}
			raw, ok := api.(bench.RawAPI)
			if !ok {
				return usagef("bench compare needs a full DynamoDB client")
			}
			for _, name := range []string{opts.Table, opts.Table + dynamostore.V2Suffix, opts.Table + "_rawcopy", opts.Table + "_rawtx", opts.Table + "_solo" + dynamostore.V2Suffix} {
				if err := mustNotExist(cmd.Context(), api, name); err != nil {
					return err
				}
			}
			res, err := bench.RunCompare(cmd.Context(), raw, bench.CompareConfig{
				Table: opts.Table, Ops: o.ops, Records: o.records, PageSize: o.pageSize, Segments: o.segments, Keep: o.keep, ServerPID: o.serverPID,
			}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if err := bench.PrintCompare(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			return bench.PrintCompareCPU(cmd.OutOrStdout(), res)
		},
	}
	cmd.Flags().IntVar(&o.ops, "ops", 1000, "operations of each kind per state, for lake and for the raw SDK each")
	cmd.Flags().IntVar(&o.records, "records", 100000, "v1 records the backfill copies (0: no backfill figures)")
	cmd.Flags().IntVar(&o.pageSize, "page-size", 1000, "backfill page size")
	cmd.Flags().IntVar(&o.segments, "segments", 8, "backfill scan segments")
	cmd.Flags().BoolVar(&o.keep, "keep", false, "keep the tables after the run")
	cmd.Flags().IntVar(&o.serverPID, "server-pid", 0, "the DynamoDB server's process on this machine: also print each copy's CPU per item, the server's and lake's")
	return cmd
}

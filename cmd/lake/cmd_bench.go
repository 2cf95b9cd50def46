package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/backend/dynamostore"
	"github.com/lakemeta/lake/bench"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/storeurl"
	"github.com/spf13/cobra"
)

func newBenchCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure what the layouts cost (prints figures, changes no user data)",
		Args:  exactArgs(0),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newBenchPrefixReadCommand(g), newBenchMigrationCommand(g), newBenchCompareCommand(g), newBenchNodeCommand(g), newBenchLinearizabilityCommand(g))
	return cmd
}

type benchPrefixReadOptions struct {
	catalog  int
	retained string
	pageSize int
	keep     bool
}

func newBenchPrefixReadCommand(g *globalOptions) *cobra.Command {
	var o benchPrefixReadOptions
	cmd := &cobra.Command{
		Use:   "prefix-read",
		Short: "Measure a tbl/ catalog refresh on layouts v1 and v2 as retained records grow",
		Long: `Create the v1 table TABLE and the v2 table TABLE_prefix_v2 named by --store
(dynamodb://TABLE; both must not exist), load the same data into both: --catalog
keys under tbl/ and, in steps, R retained records (half append-operation/, a
quarter lance-manifest/, the rest lease/ and tombstone/), and at each R do a full
tbl/ refresh in pages of 1000 and of --page-size on each layout. Prints one row
per refresh: requests, items evaluated (ScannedCount), items returned, their
ratio, read capacity units and wall time. The tables are deleted at the end
unless --keep.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			sizes, err := parseSizes(o.retained)
			if err != nil {
				return err
			}
			if !strings.HasPrefix(g.store, "dynamodb://") {
				return usagef("bench prefix-read needs --store dynamodb://TABLE")
			}
			api, opts, err := storeurl.DynamoAPI(cmd.Context(), g.store)
			if err != nil {
				return err
			}
			for _, name := range []string{opts.Table, opts.Table + dynamostore.V2Suffix} {
				if err := mustNotExist(cmd.Context(), api, name); err != nil {
					return err
				}
			}
			rows, err := bench.RunPrefixRead(cmd.Context(), api, bench.PrefixReadConfig{
				Table: opts.Table, Catalog: o.catalog, Retained: sizes, PageSize: o.pageSize, Keep: o.keep,
			}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return bench.PrintRows(cmd.OutOrStdout(), rows)
		},
	}
	cmd.Flags().IntVar(&o.catalog, "catalog", 200, "catalog keys under tbl/")
	cmd.Flags().StringVar(&o.retained, "retained", "0,10000,100000", "comma-separated, increasing numbers R of retained records")
	cmd.Flags().IntVar(&o.pageSize, "page-size", 100, "page size of the paged refresh")
	cmd.Flags().BoolVar(&o.keep, "keep", false, "keep the tables after the run")
	return cmd
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, usagef("--retained: %q is not a non-negative number", f)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, usagef("--retained must increase: %s", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// mustNotExist refuses to run the benchmark over an existing table: the
// benchmark deletes its tables at the end.
func mustNotExist(ctx context.Context, api dynamostore.API, table string) error {
	_, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var nf *types.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		return nil
	case err != nil:
		return fmt.Errorf("lake: describe table %q: %w", table, err)
	}
	return fmt.Errorf("%w: table %q exists; the benchmark creates and deletes its own tables, name new ones in --store", metastore.ErrRefused, table)
}

type benchMigrationOptions struct {
	records, pageSize, mutations int
	keep                         bool
}

func newBenchMigrationCommand(g *globalOptions) *cobra.Command {
	var o benchMigrationOptions
	cmd := &cobra.Command{
		Use:   "migration",
		Short: "Measure the backfill against a raw copy, dual-mode write cost and the finalize pause",
		Long: `Create the v1 table TABLE named by --store (dynamodb://TABLE; TABLE, TABLE_prefix_v2
and TABLE_rawcopy must not exist), load --records records, and measure:
a raw unconditional copy of the table (Scan + BatchWriteItem: the practical
ceiling), the backfill of the same records in pages of --page-size, the cost of
a CAS in state v1, in dual mode and after finalization (requests, capacity
units, latency), and how long finalize pauses writes. The tables are deleted at
the end unless --keep.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !strings.HasPrefix(g.store, "dynamodb://") {
				return usagef("bench migration needs --store dynamodb://TABLE")
			}
			api, opts, err := storeurl.DynamoAPI(cmd.Context(), g.store)
			if err != nil {
				return err
			}
			for _, name := range []string{opts.Table, opts.Table + dynamostore.V2Suffix, opts.Table + "_rawcopy"} {
				if err := mustNotExist(cmd.Context(), api, name); err != nil {
					return err
				}
			}
			res, err := bench.RunMigration(cmd.Context(), api, bench.MigrationConfig{
				Table: opts.Table, Records: o.records, PageSize: o.pageSize, Mutations: o.mutations, Keep: o.keep,
			}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return bench.PrintMigration(cmd.OutOrStdout(), res)
		},
	}
	cmd.Flags().IntVar(&o.records, "records", 100000, "v1 records to migrate")
	cmd.Flags().IntVar(&o.pageSize, "page-size", 1000, "backfill page size")
	cmd.Flags().IntVar(&o.mutations, "mutations", 500, "CAS writes per mode for the write-cost figures")
	cmd.Flags().BoolVar(&o.keep, "keep", false, "keep the tables after the run")
	return cmd
}

type benchNodeOptions struct {
	ops        int
	clients    string
	keys       int
	writeRatio float64
}

func newBenchNodeCommand(g *globalOptions) *cobra.Command {
	var o benchNodeOptions
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Measure requests per second and latency through a node against the store itself",
		Long: `Create (if needed) the store named by --store, write --keys keys tbl/benchNNNNN
into it, start a node serving it on a loopback port, and run the same
operations (a strongly consistent Get, then with probability --write-ratio a CAS
of the value it read) straight on the store and through the node, at each
concurrency of --clients. Prints ops/s, p50 and p99 latency per operation, and
the node's throughput as a fraction of the direct path's.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var clients []int
			for _, f := range strings.Split(o.clients, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil || n < 1 || n > 1024 {
					return usagef("--clients: %q is not a number from 1 to 1024", f)
				}
				clients = append(clients, n)
			}
			if o.ops < 1 || o.keys < 1 || o.writeRatio < 0 || o.writeRatio > 1 {
				return usagef("need --ops ≥ 1, --keys ≥ 1 and 0 ≤ --write-ratio ≤ 1")
			}
			s, err := storeurl.Open(cmd.Context(), g.store, &storeurl.Options{Create: true})
			if err != nil {
				return err
			}
			defer s.Close()
			rows, err := bench.RunNode(cmd.Context(), s.Driver().Name(), s, bench.NodeConfig{Ops: o.ops, Clients: clients, Keys: o.keys, WriteRatio: o.writeRatio})
			if err != nil {
				return err
			}
			return bench.PrintNodeRows(cmd.OutOrStdout(), rows)
		},
	}
	cmd.Flags().IntVar(&o.ops, "ops", 2000, "operations per run, shared by its clients")
	cmd.Flags().StringVar(&o.clients, "clients", "1,32", "comma-separated concurrency levels")
	cmd.Flags().IntVar(&o.keys, "keys", 100, "keys the operations touch")
	cmd.Flags().Float64Var(&o.writeRatio, "write-ratio", 0.2, "fraction of operations that also CAS")
	return cmd
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/bench"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/storeurl"
	"github.com/spf13/cobra"
)

func newBenchCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure what the layouts and the node cost (prints figures)",
		Args:  subcommandsOnly,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newBenchPrefixReadCommand(g), newBenchMigrationCommand(g), newBenchCompareCommand(g), newBenchNodeCommand(g), newBenchNodeMemoryCommand(),
		newBenchLinearizabilityCommand(g), newBenchLockCommand(g), newBenchReshapeCommand(g), newBenchDataFeedCommand(g), newBenchSyncLoopCommand(g), newBenchSyncCommand(g),
		newBenchProcessLoopCommand(g))
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
func mustNotExist(ctx context.Context, api ddb.API, table string) error {
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
		Short: "Measure the backfill against a raw copy, dual-mode write cost and finalize's checks",
		Long: `Create the v1 table TABLE named by --store (dynamodb://TABLE; TABLE, TABLE_prefix_v2
and TABLE_rawcopy must not exist), load --records records, and measure:
a raw unconditional copy of the table (Scan + BatchWriteItem: the practical
ceiling), the backfill of the same records in pages of --page-size, the cost of
a CAS in state v1, in dual mode and after finalization (requests, capacity
units, latency), and finalize. After the verify, --mutations keys are written,
a fifth of them by a raw SDK client as a legacy binary would (PutItem,
UpdateItem, batch deletes): the run shows which precheck detects them (the
change log alone does not), repairs them, then measures side by side, on the
same changes, finalize's online precheck and write pause with the change log
alone, with full scans (--full-reverify) and with the change log and the v1
stream (the default; its pause includes the settle delay). The first two are
rehearsals stopped after the re-check under the barrier (then
abort-finalize); the last publishes the marker. The tables are deleted at the
end unless --keep.`,
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
	cmd.Flags().IntVar(&o.mutations, "mutations", 500, "CAS writes per mode for the write-cost figures, and keys written after the verify")
	cmd.Flags().BoolVar(&o.keep, "keep", false, "keep the tables after the run")
	return cmd
}

type benchNodeOptions struct {
	ops           int
	clients       string
	keys          int
	writeRatio    float64
	allowUserKeys bool
}

func newBenchNodeCommand(g *globalOptions) *cobra.Command {
	var o benchNodeOptions
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Measure requests per second and latency through a node against the store itself",
		Long: `Create (if needed) the store named by --store, create --keys keys tbl/benchNNNNN
in it, start a node serving it on a loopback port, and run the same
operations (a strongly consistent Get, then with probability --write-ratio a CAS
of the value it read) straight on the store and through the node, at each
concurrency of --clients. Prints ops/s, p50 and p99 latency per operation, and
the node's throughput as a fraction of the direct path's. The benchmark's keys
are deleted at the end.

A store that already holds user keys is refused (exit 6) unless
--allow-user-keys: point --store at a scratch store (bolt://./bench.db). Even
then no existing key is overwritten: an existing tbl/benchNNNNN is refused.`,
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
			if !o.allowUserKeys {
				has, err := bench.StoreHasUserKeys(cmd.Context(), s)
				if err != nil {
					return err
				}
				if has {
					return fmt.Errorf("%w: the store %s holds user keys; bench node writes keys of its own: use a scratch store (--store bolt://./bench.db), or --allow-user-keys", metastore.ErrRefused, g.store)
				}
			}
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
	cmd.Flags().BoolVar(&o.allowUserKeys, "allow-user-keys", false, "run on a store that holds user keys (its keys are never overwritten)")
	return cmd
}

type benchNodeMemoryOptions struct {
	values, valueSize, clients, rounds, limit int
	keep                                      bool
	nodeBinary                                string
}

func newBenchNodeMemoryCommand() *cobra.Command {
	var o benchNodeMemoryOptions
	cmd := &cobra.Command{
		Use:   "node-memory",
		Short: "Measure a node's peak memory while clients list large values at once",
		Long: `Write --values values of --value-size bytes under tbl/ into a scratch bolt file
(in a temporary directory; --store is not used), start a node on it (this
binary's lake serve, as a child process, with its default catalog of tbl/),
wait until it is ready and idle, then let --clients clients list tbl/ at once,
--rounds times each, in pages of at most --limit items, fetching /v1/catalog
once a round. Prints the node's resident memory (VmRSS) when idle, its peak
while the clients listed (VmHWM, reset after idle, and VmRSS sampled every
5 ms), and the peak above idle. Linux only (it reads /proc).`,
		Example: `  lake bench node-memory
  lake bench node-memory --values 300 --value-size 358400 --clients 4`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin := o.nodeBinary
			if bin == "" {
				var err error
				if bin, err = os.Executable(); err != nil {
					return fmt.Errorf("lake: finding this binary to run the node: %w", err)
				}
			}
			dir, err := os.MkdirTemp("", "lake-node-memory")
			if err != nil {
				return fmt.Errorf("lake: scratch directory: %w", err)
			}
			if o.keep {
				fmt.Fprintf(cmd.ErrOrStderr(), "keeping %s\n", dir)
			} else {
				defer os.RemoveAll(dir)
			}
			res, err := bench.RunNodeMemory(cmd.Context(), bench.NodeMemoryConfig{
				Binary: bin, Dir: dir, Values: o.values, ValueSize: o.valueSize,
				Clients: o.clients, Rounds: o.rounds, Limit: o.limit, Progress: cmd.ErrOrStderr(),
			})
			if err != nil {
				return err
			}
			return bench.PrintNodeMemory(cmd.OutOrStdout(), res)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.values, "values", 300, "values under tbl/")
	f.IntVar(&o.valueSize, "value-size", metastore.MaxValueBytes, "bytes per value (at most 358400)")
	f.IntVar(&o.clients, "clients", 4, "clients listing at once")
	f.IntVar(&o.rounds, "rounds", 3, "full listings per client")
	f.IntVar(&o.limit, "limit", 1000, "page limit of each list request")
	f.BoolVar(&o.keep, "keep", false, "keep the scratch directory")
	f.StringVar(&o.nodeBinary, "node-binary", "", "run this lake binary as the node (default: this one), to compare builds")
	return cmd
}

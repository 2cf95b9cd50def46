package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/migrate"
	"github.com/lakemeta/lake/storeurl"
	"github.com/spf13/cobra"
)

type migrateOptions struct {
	fullReverify bool
	pageSize     int
	segments     int
	json         bool
	retention    time.Duration
	deleteTable  bool
	again        bool
	settle       time.Duration
	maxWCU       float64
	dryRun       bool
}

// newMigrator opens the store of --store (a dynamodb:// URL with layout
// auto) and a Migrator over it.
func (g *globalOptions) newMigrator(cmd *cobra.Command, o *migrateOptions) (*migrate.Migrator, func(), error) {
	if !strings.HasPrefix(g.store, "dynamodb://") {
		return nil, nil, usagef("dynamo-migrate needs --store dynamodb://TABLE (or LAKE_STORE), not %q", g.store)
	}
	s, err := storeurl.Open(cmd.Context(), g.store, nil)
	if err != nil {
		return nil, nil, err
	}
	d := s.Driver().(*dynamostore.Driver)
	m, err := migrate.New(d, &migrate.Options{PageSize: o.pageSize, Segments: o.segments, FullReverify: o.fullReverify, Settle: &o.settle, Retention: &o.retention, Progress: cmd.ErrOrStderr(),
		MaxWCU: o.maxWCU, DryRun: o.dryRun})
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return m, func() { s.Close() }, nil
}

func newMigrateCommand(g *globalOptions) *cobra.Command {
	var o migrateOptions
	step := func(name, short, long string) *cobra.Command {
		return &cobra.Command{
			Use: name, Short: short, Long: long, Args: exactArgs(0),
			RunE: g.withMigrator(&o, func(cmd *cobra.Command, m *migrate.Migrator) error {
				if err := m.Run(cmd.Context(), name); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: done\n", name)
				return nil
			}),
		}
	}
	cmd := &cobra.Command{
		Use:   "dynamo-migrate",
		Short: "Migrate a live DynamoDB table from layout v1 to v2 with zero downtime",
		Long: `Migrate the live table named by --store (dynamodb://TABLE) from the legacy layout v1
to the prefix-isolated layout v2, through the durable states
v1 → dual → backfill → v2-authoritative → v2-only. Each step refuses, with the
reason and exit code 6, a transition the current state forbids.

Without a subcommand, "lake dynamo-migrate --page-size N" runs (or resumes) the
backfill, as the rollout steps write it. When a writer lake does not know
changes v1 after the backfill, "repair" (or "backfill --again") converges v2
without a rollback. "lake dynamo-migrate status" names the next step. Exit
codes: 6 refused, 5 writes paused, 4 the state changed concurrently, 2 usage.
The reference is docs/migration.md.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown dynamo-migrate step %q; run `lake dynamo-migrate --help`", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("page-size") {
				return cmd.Help()
			}
			return runBackfill(cmd, g, &o)
		},
	}
	cmd.PersistentFlags().IntVar(&o.pageSize, "page-size", 100, "items per backfill or verify page (1 to 10000)")
	cmd.PersistentFlags().IntVar(&o.segments, "segments", 8, "parallel scan segments of a verification (online and under the barrier) and of a new backfill (a resumed backfill uses the count it recorded)")
	cmd.PersistentFlags().DurationVar(&o.retention, "retention", migrate.DefaultRetention, "how long v1 is kept after finalization before retire-v1 is allowed (0: at once; negative is refused)")

	status := &cobra.Command{
		Use:   "status",
		Short: "Show the state, epoch, backfill progress, live peers and the next steps",
		Args:  exactArgs(0),
		RunE: g.withMigrator(&o, func(cmd *cobra.Command, m *migrate.Migrator) error {
			st, err := m.Status(cmd.Context())
			if err != nil {
				return err
			}
			if o.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(st)
			}
			st.Print(cmd.OutOrStdout())
			return nil
		}),
	}
	status.Flags().BoolVar(&o.json, "json", false, "print JSON")

	backfill := &cobra.Command{
		Use:   "backfill",
		Short: "Copy v1 into v2 in parallel scan segments, resuming from durable cursors",
		Long: `Enter state backfill (once every live commit-capable peer observes dual and one
refresh interval has passed) and copy v1 into v2 with --segments parallel
scan segments in pages of --page-size: each record is created in v2 if
absent (conditioned on v1 still holding the scanned value and v2 having no
copy), validated if equal, or repaired (v2 := v1) if different. Each
segment's cursor is saved in the v2 table only after every item of its page
converged, and each segment scans its next page while the current page's
writes run. Rerun to resume after a crash: it redoes at most one page per
segment, with the segment count it recorded whatever --segments says.
--max-wcu bounds the write capacity units per second the backfill causes
(every write it makes counts), so that it leaves room for live traffic.
--dry-run scans v1 and reads v2 and prints how many records it would create
and repair, writing nothing. Progress goes to stderr.

With --again, after a completed first pass: a full re-pass over BOTH tables,
resumable like the first. Every v1 key is compared with its v2 copy and
converged (created, repaired v2 := v1) under conditions on both copies; then
every v2 copy whose key v1 no longer has (a legacy writer deleted it) is
removed, only while v1 still lacks the key. v1 is never written. Use it when a
writer lake does not know changed v1 after the first pass and verify found
more differences than repair can name.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error { return runBackfill(cmd, g, &o) },
	}
	backfill.Flags().Float64Var(&o.maxWCU, "max-wcu", 0, "bound on the write capacity units per second the backfill causes (0: no bound)")
	backfill.Flags().BoolVar(&o.dryRun, "dry-run", false, "count what the backfill would create and repair, writing nothing")
	backfill.Flags().BoolVar(&o.again, "again", false, "re-pass both tables after a completed backfill (repairs every difference, legacy deletes included)")

	repair := &cobra.Command{
		Use:   "repair",
		Short: "Converge the keys the last verify or refused finalize found different",
		Long: `Converge v2 to v1 for exactly the keys the last verify or refused finalize
recorded (up to 100; beyond that, run "backfill --again"), without a rollback.
Each key is read from both tables at one instant and v2 is written under
conditions on both copies: a missing copy is created, a different one is
replaced by v1's value, and a copy of a key v1 no longer has is removed, only
while v1 still lacks it. v1 is never written. Runs in state dual or backfill,
also while a finalization holds the barrier. Then run verify (or finalize
again). Refused (exit 6) when nothing is recorded.`,
		Args: exactArgs(0),
		RunE: g.withMigrator(&o, func(cmd *cobra.Command, m *migrate.Migrator) error {
			res, err := m.Repair(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "repair: %d keys converged: created %d, repaired %d, removed %d, already equal %d\n",
				res.Scanned, res.Created, res.Repaired, res.Removed, res.Validated)
			return nil
		}),
	}

	verify := &cobra.Command{
		Use:   "verify",
		Short: "Compare v1 and v2 both ways (read-only, safe during live writes)",
		Long: `Compare every v1 record with its v2 copy and every v2 record with v1. A key is
reported only after an atomic read of both copies confirms the difference.
Prints a summary (the count is of keys, each once: every v1 key, and every v2
key v1 lacks) and the first offending keys (missing in v2, extra in v2,
different; "unstamped" marks a v1 record a non-lake writer wrote). A clean
verify after a complete backfill is recorded, with the position of the v1
table's stream taken before the scan began (finalize re-checks every key
written after it); finalize requires it. Exit code 6
when differences are found; they are recorded for "lake dynamo-migrate repair".`,
		Args: exactArgs(0),
		RunE: g.withMigrator(&o, func(cmd *cobra.Command, m *migrate.Migrator) error {
			rep, err := m.Verify(cmd.Context())
			if o.json {
				if jerr := json.NewEncoder(cmd.OutOrStdout()).Encode(rep); jerr != nil {
					return jerr
				}
				return err
			}
			if err != nil && rep.Checked == 0 {
				return err
			}
			rep.Print(cmd.OutOrStdout())
			if rep.Recorded {
				fmt.Fprintln(cmd.OutOrStdout(), "recorded: finalize may proceed")
			}
			return err
		}),
	}
	verify.Flags().BoolVar(&o.json, "json", false, "print JSON")

	finalize := &cobra.Command{
		Use:   "finalize",
		Short: "Pause writes, re-verify what changed, publish the v2 marker",
		Long: `Refused while a live commit-capable peer is v1-only, the backfill is incomplete or
no verify has passed since. First, with writes still flowing, it re-checks every
key changed since the last verify: the keys lake's dual writes logged (the
change log) and the keys the v1 table's stream shows any writer touched since
the verify's recorded stream position (PutItem, UpdateItem, DeleteItem, lake
or a legacy binary); it refuses on a difference, naming the keys. Then it
installs every write-barrier item (mutations now get "writes paused", exit 5),
waits --settle for stream records still on their way, re-checks what changed
since, and publishes the monotonic marker in one transaction that checks every
barrier item is still held; v2 is then the read authority. Prints how long
writes were paused. When the stream cannot show the whole interval since the
verify (records are kept 24 hours; a stream disabled or replaced) it refuses
and names the way out: a fresh verify, or --full-reverify (both tables scanned
whole, online and under the barrier; the pause grows with the table). If it is
interrupted, status shows it; run finalize again to finish or abort-finalize
to resume writes.`,
		Args: exactArgs(0),
		RunE: g.withMigrator(&o, func(cmd *cobra.Command, m *migrate.Migrator) error {
			rep, err := m.Finalize(cmd.Context())
			if err != nil {
				// A refusal on differences names them, as verify does.
				for _, r := range []migrate.Report{rep.Precheck, rep.Reverify} {
					if !r.Clean() {
						r.Print(cmd.OutOrStdout())
					}
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "finalized: writes were paused %v; re-verified %d keys under the barrier (%d before it; %d v1 stream records read)\n",
				rep.Pause.Round(time.Millisecond), rep.Reverify.Checked, rep.Precheck.Checked, rep.Records)
			return nil
		}),
	}

	finalize.Flags().BoolVar(&o.fullReverify, "full-reverify", false, "check by scanning both tables whole, online and under the barrier, instead of the change log and the stream (proves equality when the stream cannot; the pause grows with the table)")
	finalize.Flags().DurationVar(&o.settle, "settle", migrate.DefaultSettle, "under the barrier, wait this long for stream records of writes made before it, then read the stream (writes are paused meanwhile; 0 is honoured, negative is refused)")

	retire := &cobra.Command{
		Use:   "retire-v1",
		Short: "Stop mirroring v1 (state v2-only); --delete-table also deletes it",
		Long: `Refused until every live peer is v2-capable and --retention has passed since
finalization (status prints when that is). Stops v1 mirroring (state v2-only).
The v1 table is deleted only with --delete-table; in state v2-only,
"retire-v1 --delete-table" deletes a v1 table left behind. A v1 table that is
already gone (deleted by hand after finalization) is retired at once.`,
		Args: exactArgs(0),
		RunE: g.withMigrator(&o, func(cmd *cobra.Command, m *migrate.Migrator) error {
			if err := m.RetireV1(cmd.Context(), o.deleteTable); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "retire-v1: done")
			return nil
		}),
	}
	retire.Flags().BoolVar(&o.deleteTable, "delete-table", false, "also delete the v1 table")

	cmd.AddCommand(status,
		step("dual", "Enter dual mode: create v2; every mutation then updates v1 and v2 atomically", `Create the v2 table (TABLE_prefix_v2) if needed and enter state dual: v1 stays
the read authority and every mutation updates v1 and v2 in one transaction that
also checks the write barrier is absent. Enables a stream on the v1 table
(KEYS_ONLY; a stream already enabled is kept as it is), through which finalize
sees writes lake did not make.`),
		backfill, verify, repair, finalize,
		step("abort-finalize", "Remove the write barrier of an unfinished finalization", `Remove the write barrier in a transaction that checks the marker is absent;
writes resume in dual mode.`),
		step("rollback", "Return to state v1 (refused after finalization)", `Before finalization: return to state v1, bump the epoch, discard the backfill
cursor and any verification. After finalization it is refused: v2 is the
authority, and only a dual-capable binary may run.`),
		retire,
	)
	return cmd
}

func runBackfill(cmd *cobra.Command, g *globalOptions, o *migrateOptions) error {
	if o.pageSize < 1 || o.pageSize > metastore.MaxListLimit {
		return usagef("--page-size must be 1 to %d, got %d", metastore.MaxListLimit, o.pageSize)
	}
	if o.maxWCU < 0 {
		return usagef("--max-wcu must not be negative, got %v", o.maxWCU)
	}
	if o.dryRun && o.again {
		return usagef("--dry-run counts what the first pass would do; it does not combine with --again")
	}
	m, done, err := g.newMigrator(cmd, o)
	if err != nil {
		return err
	}
	defer done()
	if o.again {
		a, err := m.BackfillAgain(cmd.Context())
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "backfill --again: complete: scanned %d, created %d, validated %d, repaired %d, removed %d\n",
			a.Scanned, a.Created, a.Validated, a.Repaired, a.Removed)
		return nil
	}
	if err := m.Run(cmd.Context(), "backfill"); err != nil {
		return err
	}
	if o.dryRun {
		fmt.Fprintln(cmd.OutOrStdout(), "backfill: dry run complete, nothing written")
		return nil
	}
	fmt.Fprintln(cmd.OutOrStdout(), "backfill: complete")
	return nil
}

// withMigrator makes a RunE that opens the Migrator of --store, runs fn
// with it, and closes the store.
func (g *globalOptions) withMigrator(o *migrateOptions, fn func(*cobra.Command, *migrate.Migrator) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		m, done, err := g.newMigrator(cmd, o)
		if err != nil {
			return err
		}
		defer done()
		return fn(cmd, m)
	}
}

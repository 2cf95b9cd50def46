package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/reshape"
	"github.com/lakemeta/lake/storeurl"
	"github.com/lakemeta/lake/sweep"
	"github.com/spf13/cobra"
)

// reshapeOptions are the flags every reshape subcommand takes.
type reshapeOptions struct {
	endpoint, region string
}

func newReshapeCommand(g *globalOptions) *cobra.Command {
	var o reshapeOptions
	cmd := &cobra.Command{
		Use:   "reshape",
		Short: "Reshape any live DynamoDB table online: add an index, backfill it, prove coverage",
		Long: `Reshape a live DynamoDB table (any table, not only lake's) from a spec file
(JSON; see docs/reshape.md and examples/reshape/saas-comments.json): add a global
secondary index online, backfill the attributes it is keyed on into the items
written before it, with one conditional UpdateItem per item, and verify
coverage before the old read path is retired.

  lake --store dynamodb://saas reshape demo      create the seed's demo table
  lake reshape plan SPEC                         read-only: what apply would do
  lake reshape apply SPEC                        add the index, wait, sweep
  lake reshape verify SPEC                       the end condition (exit 0 only at full coverage)

A key rewrite (kind rewrite-key; examples/reshape/saas-comments-by-member.json)
copies each covered item to a new key derived from its attributes, while the Go
helpers dual-write and dual-read, then deletes the old items:

  lake reshape plan SPEC       read-only: new keys, collisions (exit 6 if any)
  lake reshape apply SPEC      copy each item (transaction: old unchanged, new absent)
  lake reshape verify SPEC     missing, different, orphaned copies; recorded in --state
  lake reshape finalize SPEC   delete the old items (needs a clean verify)
  lake reshape rollback SPEC   before finalize: delete the copies instead

The table is the spec's. The DynamoDB endpoint and region come from --endpoint
and --region, else from --store when it is a dynamodb:// URL (its ?endpoint= and
?region=), else from the AWS configuration (AWS_ENDPOINT_URL_DYNAMODB,
AWS_REGION, profiles).

Attribute names are taken literally (author.id, tags[0] are one attribute each).
An item that cannot be converted (not derivable, over 400 KB with the new
attributes, holding a derived attribute of its own) is named and skipped; the
sweep goes on.

Exit codes: 0 ok, 1 error, 2 invalid spec or flags (and plan: items already hold
a derived attribute, or the rewrite's marker), 3 table not found, 6 refused
(apply or plan: items that cannot be converted, named; verify: coverage
incomplete, copies not all equal; an index of that name with other keys; plan:
new keys collide; finalize without a clean verify; another run holds --state).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.PersistentFlags().StringVar(&o.endpoint, "endpoint", "", "DynamoDB endpoint URL (default: --store's, else AWS_ENDPOINT_URL_DYNAMODB, else AWS's)")
	cmd.PersistentFlags().StringVar(&o.region, "region", "", "AWS region (default: --store's, else AWS_REGION or the profile's)")
	cmd.AddCommand(newReshapePlanCommand(g, &o), newReshapeApplyCommand(g, &o), newReshapeVerifyCommand(g, &o), newReshapeDemoCommand(g, &o),
		newReshapeFinalizeCommand(g, &o), newReshapeRollbackCommand(g, &o))
	return cmd
}

// client returns a DynamoDB client, and the table --store names if it is a
// dynamodb:// URL. The client retries with lake's DynamoDB retry policy:
// every write of a reshape is conditional, so a retry is safe.
func (o *reshapeOptions) client(ctx context.Context, g *globalOptions) (*dynamodb.Client, string, error) {
	endpoint, region, table := o.endpoint, o.region, ""
	if rest, ok := strings.CutPrefix(g.store, "dynamodb://"); ok {
		t, err := storeurl.ParseDynamo(rest)
		if err != nil {
			return nil, "", err
		}
		table = t.Table
		if endpoint == "" {
			endpoint = t.Endpoint
		}
		if region == "" {
			region = t.Region
		}
	}
	cfg, err := ddb.LoadConfig(ctx, region)
	if errors.Is(err, ddb.ErrNoRegion) {
		return nil, "", usagef("no AWS region: set AWS_REGION or pass --region")
	}
	if err != nil {
		return nil, "", err
	}
	// A long sweep meets bursts of throttling: the SDK retries each request
	// with lake's DynamoDB retry policy.
	c := ddb.NewRetryingClient(cfg, endpoint)
	return c, table, nil
}

// reshaper loads the spec and opens a Reshaper on its table.
func (o *reshapeOptions) reshaper(cmd *cobra.Command, g *globalOptions, specPath string) (*reshape.Reshaper, error) {
	spec, err := reshape.Load(specPath)
	if err != nil {
		return nil, err
	}
	c, _, err := o.client(cmd.Context(), g)
	if err != nil {
		return nil, err
	}
	return reshape.New(cmd.Context(), c, spec)
}

// progressPrinter prints a sweep's progress on w at most once a second.
type progressPrinter struct {
	w     io.Writer
	verb  string
	mu    sync.Mutex
	last  time.Time
	names []string // counts to show
}

func (p *progressPrinter) report(pr sweep.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.last) < time.Second && pr.SegmentsDone < pr.Segments {
		return
	}
	p.last = time.Now()
	wcu := ""
	if len(p.names) > 0 {
		wcu = fmt.Sprintf(", %.1f WCU", pr.WriteUnits)
	}
	fmt.Fprintf(p.w, "%s: %d/%d segments done, %d items scanned (%.0f/s)%s%s\n",
		p.verb, pr.SegmentsDone, pr.Segments, pr.Scanned, pr.ItemsPerSecond(), countsText(pr.Counts, p.names), wcu)
}

func countsText(c map[string]int64, names []string) string {
	var sb strings.Builder
	for _, n := range names {
		fmt.Fprintf(&sb, ", %s %d", n, c[n])
	}
	return sb.String()
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

type reshapePlanOptions struct {
	state                             string
	segments, pageSize, examples, top int
	hotShare                          float64
	json                              bool
}

func newReshapePlanCommand(g *globalOptions, o *reshapeOptions) *cobra.Command {
	var po reshapePlanOptions
	cmd := &cobra.Command{
		Use:   "plan SPEC",
		Short: "Read-only pass: items covered, converted, derivable, not derivable; the new key's spread",
		Long: `Scan the spec's table (read-only: nothing is created or written) and print how many
items the spec covers, how many are already converted, how many apply would
write (missing or stale, and the write capacity it would cost, index writes
included), how many cannot be derived (a referenced attribute is missing) with
examples, and how the new partition key would spread the covered items: the
hottest values and their share, with a warning when one holds more than
--hot-share of them. A GSI whose partition key concentrates writes can throttle
the base table's writes while it is built: plan says so before anything exists.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if spec, err := loadSpec(args[0]); err != nil {
				return err
			} else if spec.Kind == reshape.KindRewriteKey {
				return runRewritePlan(cmd, g, o, spec, args[0], po.state, po)
			}
			r, err := o.reshaper(cmd, g, args[0])
			if err != nil {
				return err
			}
			pp := &progressPrinter{w: cmd.ErrOrStderr(), verb: "plan"}
			rep, err := r.Plan(cmd.Context(), reshape.PlanOptions{Segments: po.segments, PageSize: po.pageSize, Examples: po.examples, Top: po.top, HotShare: po.hotShare, Progress: pp.report})
			if err != nil {
				return err
			}
			if po.json {
				if err := printJSON(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			} else {
				printPlan(cmd.OutOrStdout(), r.Spec(), rep)
			}
			return rep.Err()
		},
	}
	cmd.Flags().IntVar(&po.segments, "segments", sweep.DefaultSegments, "parallel scan segments")
	cmd.Flags().IntVar(&po.pageSize, "page-size", sweep.DefaultPageSize, "items evaluated per Scan request")
	cmd.Flags().IntVar(&po.examples, "examples", reshape.DefaultExamples, "not-derivable items to show")
	cmd.Flags().IntVar(&po.top, "top", reshape.DefaultTop, "hottest new partition keys to show")
	cmd.Flags().Float64Var(&po.hotShare, "hot-share", reshape.DefaultHotShare, "warn when one new partition key holds more than this share of the covered items")
	cmd.Flags().BoolVar(&po.json, "json", false, "print the report as JSON")
	cmd.Flags().StringVar(&po.state, "state", "", "key rewrite: store URL of its state, to print its phase (default bolt://SPEC-without-extension.state.db)")
	return cmd
}

func printPlan(w io.Writer, s *reshape.Spec, p reshape.PlanReport) {
	status := p.IndexStatus
	if status == "" {
		status = "does not exist yet: apply adds it"
	}
	fmt.Fprintf(w, "table %s, index %s: %s\n", p.Table, p.Index, status)
	fmt.Fprintf(w, "scanned %d items, %d covered by the spec\n", p.Scanned, p.Covered)
	fmt.Fprintf(w, "  already converted  %d\n", p.Converted)
	fmt.Fprintf(w, "  derivable          %d (missing %d, stale %d): apply writes them, about %.0f WCU with the index writes\n", p.Derivable(), p.Missing, p.Stale, p.EstimatedWCU)
	fmt.Fprintf(w, "  cannot convert     %d (apply skips them, names them and exits 6)\n", p.NotDerivable)
	for _, e := range p.Examples {
		fmt.Fprintf(w, "    %s: %s\n", e.Key, e.Reason)
	}
	if p.Foreign > 0 {
		fmt.Fprintf(w, "  foreign            %d (hold a derived attribute of their own: the spec is refused)\n", p.Foreign)
		for _, e := range p.ForeignExamples {
			fmt.Fprintf(w, "    %s: %s\n", e.Key, e.Reason)
		}
	}
	fmt.Fprintf(w, "new partition key %s: %d distinct values; hottest:\n", s.Index.PartitionKey.Attribute, p.DistinctKeys)
	for _, k := range p.Hottest {
		fmt.Fprintf(w, "  %-30s %8d items %6.1f%%\n", k.Value, k.Items, k.Share*100)
	}
	if p.Warning != "" {
		fmt.Fprintf(w, "warning: %s\n", p.Warning)
	}
}

type reshapeApplyOptions struct {
	state                       string
	segments, pageSize, workers int
	maxWCU                      float64
	dryRun                      bool
	poll, maxWait               time.Duration
}

func newReshapeApplyCommand(g *globalOptions, o *reshapeOptions) *cobra.Command {
	var ao reshapeApplyOptions
	cmd := &cobra.Command{
		Use:   "apply SPEC",
		Short: "Add the index if missing, wait until ACTIVE, and backfill every covered item",
		Long: `Add the spec's global secondary index with UpdateTable if the table does not have
it, and wait, printing its status, while it is CREATING and backfilling until it
is ACTIVE (the table keeps serving meanwhile). Then sweep the whole table in
--segments parallel segments and give every covered item that lacks the new
attributes (or holds stale ones: a source changed after its conversion) its
derived values, with one conditional UpdateItem per item: the attributes are set
only if the item still exists, its source attributes still hold the values read,
and the new attributes still hold what was read. A failed condition re-reads the
item and decides again; a deleted item is never re-created and a concurrent
write is never overwritten.

The sweep's cursors are saved in the lake store --state after each page: an
interrupted apply (Ctrl-C, a crash, a kill) run again resumes where it stopped,
redoing at most one page per segment. A finished sweep is forgotten, so every
apply makes at least one whole pass. --max-wcu bounds the write capacity units
per second, counting the index writes (reported by DynamoDB per write).

With a key rewrite spec (kind rewrite-key), apply copies each covered item to its
new key instead, with one TransactWriteItems per item: a ConditionCheck that the
old item still holds what was read, and a Put of the copy (marked with the old
key) conditioned on the new key being absent, or holding the stale copy being
repaired. A copy whose old item is gone (an orphan) is deleted in a transaction
checking the old item is still absent. An item at a new key that the rewrite did
not copy from that old item is never overwritten: it is counted as a collision.
The rewrite's phase, cursors and verify record live in --state.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ao.maxWCU < 0 || ao.workers < 0 || ao.poll <= 0 || ao.maxWait <= 0 {
				return usagef("--max-wcu and --workers must not be negative, --poll and --max-wait must be positive")
			}
			if spec, err := loadSpec(args[0]); err != nil {
				return err
			} else if spec.Kind == reshape.KindRewriteKey {
				return runRewriteApply(cmd, g, o, spec, args[0], rewriteFlags{state: ao.state, segments: ao.segments,
					pageSize: ao.pageSize, workers: ao.workers, maxWCU: ao.maxWCU, dryRun: ao.dryRun})
			}
			r, err := o.reshaper(cmd, g, args[0])
			if err != nil {
				return err
			}
			var state *metastore.Store
			if !ao.dryRun {
				state, err = openState(cmd.Context(), ao.state, args[0])
				if err != nil {
					return err
				}
				defer state.Close()
			}
			errw, out := cmd.ErrOrStderr(), cmd.OutOrStdout()
			pp := &progressPrinter{w: errw, verb: "apply", names: []string{"wrote", "repaired", "gone", "contended", "failed"}}
			res, err := r.Apply(cmd.Context(), reshape.ApplyOptions{
				Segments: ao.segments, PageSize: ao.pageSize, MaxWCU: ao.maxWCU, Workers: ao.workers,
				DryRun: ao.dryRun, State: state, Progress: pp.report,
				Index: reshape.IndexOptions{PollInterval: ao.poll, MaxWait: ao.maxWait, Progress: func(st reshape.IndexStatus) {
					fmt.Fprintf(errw, "index %s: %s%s, %d items, %d bytes (%s)\n", r.Spec().Index.Name, st.Status,
						map[bool]string{true: " backfilling"}[st.Backfilling], st.ItemCount, st.SizeBytes, st.Elapsed.Round(time.Second))
				}},
			})
			if err != nil {
				return err
			}
			printApply(out, r.Spec(), args[0], ao.dryRun, res)
			return res.Err()
		},
	}
	cmd.Flags().StringVar(&ao.state, "state", "", "store URL for the sweep's cursors (default bolt://SPEC-without-extension.state.db beside the spec; any lake store)")
	cmd.Flags().IntVar(&ao.segments, "segments", sweep.DefaultSegments, "parallel scan segments of a new sweep (a resumed sweep keeps its own)")
	cmd.Flags().IntVar(&ao.pageSize, "page-size", sweep.DefaultPageSize, "items evaluated per Scan request")
	cmd.Flags().IntVar(&ao.workers, "workers", reshape.DefaultWorkers, "items of a page converted at once, per segment")
	cmd.Flags().Float64Var(&ao.maxWCU, "max-wcu", 0, "bound on write capacity units per second, index writes included (0: none)")
	cmd.Flags().BoolVar(&ao.dryRun, "dry-run", false, "create and write nothing; print what would be done")
	cmd.Flags().DurationVar(&ao.poll, "poll", reshape.DefaultPollInterval, "time between two status checks while the index is built")
	cmd.Flags().DurationVar(&ao.maxWait, "max-wait", reshape.DefaultMaxWait, "give up waiting for the index after this long (run apply again to wait on)")
	return cmd
}

func printApply(w io.Writer, s *reshape.Spec, specPath string, dry bool, res reshape.ApplyResult) {
	c := res.Sweep.Counts
	switch {
	case dry && res.IndexCreated:
		fmt.Fprintf(w, "dry run: would add index %s to %s\n", s.Index.Name, s.Table)
	case res.IndexCreated:
		fmt.Fprintf(w, "index %s: added and ACTIVE\n", s.Index.Name)
	default:
		fmt.Fprintf(w, "index %s: ACTIVE\n", s.Index.Name)
	}
	verb := "wrote"
	if dry {
		verb = "would write"
	}
	perItem := 0.0
	if n := c["wrote"] + c["repaired"]; n > 0 {
		perItem = res.Sweep.WriteUnits / float64(n)
	}
	fmt.Fprintf(w, "sweep: %d segments, %d items scanned in %s (%.0f items/s)%s\n", res.Sweep.Segments, res.Sweep.Scanned,
		res.Sweep.Elapsed.Round(time.Millisecond), res.Sweep.ItemsPerSecond(), map[bool]string{true: ", resumed"}[res.Sweep.Resumed])
	fmt.Fprintf(w, "  %s %d, repaired %d, gone %d (deleted meanwhile: not re-created), contended %d, failed %d, unchanged %d, condition retries %d\n",
		verb, c["wrote"], c["repaired"], c["gone"], c["contended"], c["failed"], c["unchanged"], c["retries"])
	for _, f := range res.Failed {
		fmt.Fprintf(w, "  failed %s: %s\n", f.Key, f.Detail)
	}
	if n := c["failed"]; n > int64(len(res.Failed)) {
		fmt.Fprintf(w, "  … and %d more (lake reshape verify lists them)\n", n-int64(len(res.Failed)))
	}
	if !dry {
		fmt.Fprintf(w, "  %.1f write capacity units, %.2f per item written (table and index)\n", res.Sweep.WriteUnits, perItem)
	}
	if c["contended"] > 0 {
		fmt.Fprintf(w, "some items kept changing under the sweep: run apply again\n")
	}
	fmt.Fprintf(w, "next: lake reshape verify %s\n", specPath)
}

type reshapeVerifyOptions struct {
	segments, pageSize, sample, retries, list int
	report, obsoleteBefore, state             string
	json                                      bool
}

func newReshapeVerifyCommand(g *globalOptions, o *reshapeOptions) *cobra.Command {
	var vo reshapeVerifyOptions
	cmd := &cobra.Command{
		Use:   "verify SPEC",
		Short: "Prove coverage: every covered item converted and the index agreeing (exit 0 only then)",
		Long: `Paginate the whole live table (strongly consistent reads) and report coverage per
segment: covered, converted, missing, stale (a source changed after conversion),
not derivable, and obsolete (with --obsolete-before), with counts and a digest,
listing the items missing or stale. Then query the index for a sample of new
partition key values and check it returns exactly what the table holds under
each, retrying --index-retries times because a GSI is eventually consistent even
once ACTIVE. The full report is written as JSON to --report.

Exit 0 only at full coverage: nothing missing, stale or not derivable, and the
index agreeing. That is the end condition after which the old read path may be
retired. Exit 6 when coverage is incomplete (run apply, or fix the items).

--obsolete-before TIME is the end condition of a lazy-only backfill: missing
items whose timestamp attribute (the spec's "timestamp") is older are obsolete
by design, counted apart, and do not make coverage incomplete.

With a key rewrite spec (kind rewrite-key), verify checks each old item against
the item at its new key (missing, different, a collision) and each copy against
its old item (an orphan when the old item is gone), reading a discrepancy again
before reporting it, and records the outcome in --state: finalize needs it clean.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var cutoff time.Time
			if vo.obsoleteBefore != "" {
				var err error
				if cutoff, err = reshape.ParseCutoff(vo.obsoleteBefore); err != nil {
					return err
				}
			}
			if spec, err := loadSpec(args[0]); err != nil {
				return err
			} else if spec.Kind == reshape.KindRewriteKey {
				if !cutoff.IsZero() {
					return usagef("--obsolete-before is for an add-index spec, not a key rewrite")
				}
				return runRewriteVerify(cmd, g, o, spec, args[0], vo)
			}
			r, err := o.reshaper(cmd, g, args[0])
			if err != nil {
				return err
			}
			if !cutoff.IsZero() && r.Spec().Timestamp == "" {
				return usagef("--obsolete-before needs the spec's \"timestamp\" attribute")
			}
			if vo.report == "" {
				vo.report = reshape.BesideSpec(args[0], reshape.ReportSuffix)
			}
			pp := &progressPrinter{w: cmd.ErrOrStderr(), verb: "verify"}
			rep, err := r.Verify(cmd.Context(), reshape.VerifyOptions{
				Segments: vo.segments, PageSize: vo.pageSize, ObsoleteBefore: cutoff, Sample: vo.sample,
				IndexRetries: vo.retries, List: max(vo.list, reshape.DefaultList), Progress: pp.report,
			})
			if err != nil {
				return err
			}
			if err := reshape.WriteReport(vo.report, rep); err != nil {
				return err
			}
			if vo.json {
				if err := printJSON(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			} else {
				printVerify(cmd.OutOrStdout(), rep, vo.list, vo.report)
			}
			return rep.Err()
		},
	}
	cmd.Flags().IntVar(&vo.segments, "segments", sweep.DefaultSegments, "parallel scan segments")
	cmd.Flags().IntVar(&vo.pageSize, "page-size", sweep.DefaultPageSize, "items evaluated per Scan request")
	cmd.Flags().IntVar(&vo.sample, "sample", reshape.DefaultSample, "new partition key values checked in the index")
	cmd.Flags().IntVar(&vo.retries, "index-retries", reshape.DefaultIndexRetries, "queries again of a sampled key the index answers differently (waits double from 200ms)")
	cmd.Flags().IntVar(&vo.list, "list", 20, "missing and stale items printed (the report file holds up to 100 of each)")
	cmd.Flags().StringVar(&vo.report, "report", "", "report file (default SPEC-without-extension.verify.json beside the spec)")
	cmd.Flags().StringVar(&vo.obsoleteBefore, "obsolete-before", "", "obsolescence cutoff of a lazy-only backfill: an RFC 3339 time or a date (2026-01-31)")
	cmd.Flags().BoolVar(&vo.json, "json", false, "print the report as JSON")
	cmd.Flags().StringVar(&vo.state, "state", "", "key rewrite: store URL of its state, where the outcome is recorded (default bolt://SPEC-without-extension.state.db)")
	return cmd
}

func printVerify(w io.Writer, rep *reshape.VerifyReport, list int, path string) {
	fmt.Fprintf(w, "table %s, index %s\n", rep.Table, rep.Index)
	fmt.Fprintf(w, "%7s %9s %9s %9s %9s %7s %13s %9s  %s\n", "segment", "scanned", "covered", "converted", "missing", "stale", "not-derivable", "obsolete", "digest")
	row := func(name string, c reshape.Counts, digest string) {
		fmt.Fprintf(w, "%7s %9d %9d %9d %9d %7d %13d %9d  %s\n", name, c.Scanned, c.Covered, c.Converted, c.Missing, c.Stale, c.NotDerivable, c.Obsolete, digest[:16])
	}
	for _, s := range rep.Segments {
		row(fmt.Sprint(s.Segment), s.Counts, s.Digest)
	}
	row("total", rep.Total, rep.Digest)
	show := func(title string, items []reshape.ItemRef) {
		for i, it := range items {
			if i == list {
				fmt.Fprintf(w, "  … (%s holds more)\n", path)
				break
			}
			if i == 0 {
				fmt.Fprintf(w, "%s:\n", title)
			}
			if it.Detail != "" {
				fmt.Fprintf(w, "  %s: %s\n", it.Key, it.Detail)
			} else {
				fmt.Fprintf(w, "  %s\n", it.Key)
			}
		}
	}
	show("missing", rep.Missing)
	show("stale", rep.Stale)
	show("not derivable", rep.NotDerivable)
	ic := rep.IndexCheck
	if ic.Skipped != "" {
		fmt.Fprintf(w, "index check: skipped: %s\n", ic.Skipped)
	} else {
		fmt.Fprintf(w, "index check: %d of %d sampled keys match the table (%d retries for the index's eventual consistency)\n", ic.Matched, ic.Checked, ic.Retries)
		if ic.Unsettled > 0 {
			fmt.Fprintf(w, "  %d sampled keys kept changing under the check (live writes): not judged\n", ic.Unsettled)
		}
		for _, m := range ic.Mismatches {
			fmt.Fprintf(w, "  %s: %d missing from the index, %d extra\n", m.Value, len(m.Missing), len(m.Extra))
		}
	}
	fmt.Fprintf(w, "report: %s\n", path)
	if rep.Complete {
		fmt.Fprintf(w, "coverage complete: the old read path may be retired\n")
	}
}

type reshapeDemoOptions struct {
	workspaces, members, docs, comments int
}

func newReshapeDemoCommand(g *globalOptions, o *reshapeOptions) *cobra.Command {
	var do reshapeDemoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Create the seed's SaaS table (workspaces, members, documents, comments) to try reshape on",
		Long: `Create the table named by --store (dynamodb://TABLE; it must not exist) as the
SaaS example of docs/reshape.md: PK = "WS#<id>", an overloaded SK (META,
MEMBER#<id>, DOC#<date>#<docid>), and comments as new items in the workspace
partition under their document (SK DOC#<date>#<docid>#CMT#<time>#<id>), all written
before any index exists. It then lists the comments of document x7 of workspace
a91 with begins_with, the query the keys already serve. Try then, with the
spec's table set to TABLE (examples/reshape/saas-comments.json names "saas"):

  lake reshape plan examples/reshape/saas-comments.json
  lake reshape apply examples/reshape/saas-comments.json
  lake reshape verify examples/reshape/saas-comments.json`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !strings.HasPrefix(g.store, "dynamodb://") {
				return usagef("reshape demo needs --store dynamodb://TABLE (the table to create), not %q", g.store)
			}
			c, table, err := o.client(cmd.Context(), g)
			if err != nil {
				return err
			}
			res, err := reshape.Demo(cmd.Context(), c, table, reshape.DemoOptions{Workspaces: do.workspaces, MembersPerWS: do.members, DocsPerWS: do.docs, CommentsPerDoc: do.comments})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "created table %s: %d items, %d of them comments, no index\n", table, res.Items, res.Comments)
			fmt.Fprintf(w, "%s:\n", res.ListingQuery)
			for _, it := range res.Listing {
				key := map[string]types.AttributeValue{"PK": it["PK"], "SK": it["SK"]}
				fmt.Fprintf(w, "  %s  memberId=%s\n", reshape.KeyString(key), reshape.KeyString(map[string]types.AttributeValue{"": it["memberId"]})[1:])
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&do.workspaces, "workspaces", reshape.DefaultDemoWorkspaces, "workspaces")
	cmd.Flags().IntVar(&do.members, "members", reshape.DefaultDemoMembers, "members per workspace")
	cmd.Flags().IntVar(&do.docs, "docs", reshape.DefaultDemoDocs, "documents per workspace")
	cmd.Flags().IntVar(&do.comments, "comments", reshape.DefaultDemoComments, "comments per document")
	return cmd
}

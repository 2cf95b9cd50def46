package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/boltstore"
	"github.com/lakemeta/lake/reshape"
	"github.com/lakemeta/lake/storeurl"
	"github.com/lakemeta/lake/sweep"
	"github.com/spf13/cobra"
)

// rewriteFlags are the flags of the key rewrite's sweeping commands.
type rewriteFlags struct {
	state                       string
	segments, pageSize, workers int
	maxWCU                      float64
	dryRun                      bool
	settle                      time.Duration
}

func (f *rewriteFlags) add(cmd *cobra.Command, withSettle bool) {
	cmd.Flags().StringVar(&f.state, "state", "", "store URL of the rewrite's phase, cursors and verify record (default bolt://SPEC-without-extension.state.db; use a dynamodb:// store when the application's helpers run in other processes)")
	cmd.Flags().IntVar(&f.segments, "segments", sweep.DefaultSegments, "parallel scan segments of a new sweep (a resumed sweep keeps its own)")
	cmd.Flags().IntVar(&f.pageSize, "page-size", sweep.DefaultPageSize, "items evaluated per Scan request")
	cmd.Flags().IntVar(&f.workers, "workers", reshape.DefaultWorkers, "items of a page handled at once, per segment")
	cmd.Flags().Float64Var(&f.maxWCU, "max-wcu", 0, "bound on write capacity units per second, both writes of each transaction counted (0: none)")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "write nothing and record nothing; print what would be done")
	if withSettle {
		cmd.Flags().DurationVar(&f.settle, "settle", 0, "wait after recording the phase, so every helper has read it (default twice the helpers' refresh interval, 2s)")
	}
}

func (f *rewriteFlags) options(pp *progressPrinter) reshape.RewriteOptions {
	return reshape.RewriteOptions{Segments: f.segments, PageSize: f.pageSize, MaxWCU: f.maxWCU, Workers: f.workers,
		DryRun: f.dryRun, Settle: f.settle, Progress: pp.report}
}

// openState opens a reshape's state store (default: a bolt file beside
// the spec). A bolt file held by another process is, here, another run of
// a reshape command on the same spec, and the error says so.
func openState(ctx context.Context, url, specPath string) (*metastore.Store, error) {
	if url == "" {
		url = reshape.DefaultStateURL(specPath)
	}
	st, err := storeurl.Open(ctx, url, &storeurl.Options{Create: strings.HasPrefix(url, "bolt://")})
	if errors.Is(err, boltstore.ErrLocked) {
		return nil, fmt.Errorf("%w: reshape: the state %s is held by another process: another `lake reshape` apply, finalize or rollback of this spec is running; wait for it to finish (two runs would sweep the same items at once)", metastore.ErrRefused, url)
	}
	return st, err
}

// rewriter opens a key rewrite; the caller closes the state store.
func (o *reshapeOptions) rewriter(cmd *cobra.Command, g *globalOptions, spec *reshape.Spec, specPath, stateURL string) (*reshape.Rewrite, *metastore.Store, error) {
	c, _, err := o.client(cmd.Context(), g)
	if err != nil {
		return nil, nil, err
	}
	state, err := openState(cmd.Context(), stateURL, specPath)
	if err != nil {
		return nil, nil, err
	}
	rw, err := reshape.NewRewrite(cmd.Context(), c, spec, state)
	if err != nil {
		state.Close()
		return nil, nil, err
	}
	return rw, state, nil
}

// loadSpec loads and validates a spec of any kind.
func loadSpec(path string) (*reshape.Spec, error) { return reshape.Load(path) }

func runRewritePlan(cmd *cobra.Command, g *globalOptions, o *reshapeOptions, spec *reshape.Spec, specPath, stateURL string, po reshapePlanOptions) error {
	rw, state, err := o.rewriter(cmd, g, spec, specPath, stateURL)
	if err != nil {
		return err
	}
	defer state.Close()
	pp := &progressPrinter{w: cmd.ErrOrStderr(), verb: "plan"}
	plan, err := rw.PlanRewrite(cmd.Context(), reshape.PlanOptions{Segments: po.segments, PageSize: po.pageSize, Examples: po.examples, Top: po.top, HotShare: po.hotShare, Progress: pp.report})
	if err != nil {
		return err
	}
	if po.json {
		if err := printJSON(cmd.OutOrStdout(), plan); err != nil {
			return err
		}
	} else {
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "table %s, key rewrite (phase %s)\n", plan.Table, plan.Phase)
		fmt.Fprintf(w, "scanned %d items, %d covered, %d with a new key, %d copies already made\n", plan.Scanned, plan.Covered, plan.Derivable, plan.Copies)
		for _, e := range plan.Examples {
			fmt.Fprintf(w, "  %s  →  %s\n", e.Key, e.Detail)
		}
		for _, e := range plan.MarkerClashes {
			fmt.Fprintf(w, "marker clash: %s: %s\n", e.Key, e.Detail)
		}
		if len(plan.NotDerivable) > 0 {
			fmt.Fprintf(w, "not derivable (they would stay under their old key):\n")
			for _, e := range plan.NotDerivable {
				fmt.Fprintf(w, "  %s: %s\n", e.Key, e.Detail)
			}
		}
		fmt.Fprintf(w, "new partition key %s: %d distinct values; hottest:\n", rw.KeyNames()[0], plan.DistinctKeys)
		for _, k := range plan.Hottest {
			fmt.Fprintf(w, "  %-30s %8d items %6.1f%%\n", k.Value, k.Items, k.Share*100)
		}
		if plan.Warning != "" {
			fmt.Fprintf(w, "warning: %s\n", plan.Warning)
		}
		for _, c := range plan.Collisions {
			fmt.Fprintf(w, "collision: %s ← %s\n", c.NewKey, strings.Join(c.Claims, ", "))
		}
	}
	return plan.Verdict()
}

func runRewriteApply(cmd *cobra.Command, g *globalOptions, o *reshapeOptions, spec *reshape.Spec, specPath string, f rewriteFlags) error {
	rw, state, err := o.rewriter(cmd, g, spec, specPath, f.state)
	if err != nil {
		return err
	}
	defer state.Close()
	pp := &progressPrinter{w: cmd.ErrOrStderr(), verb: "apply", names: []string{reshape.OutCopied, reshape.OutRepaired, reshape.OutOrphanRemoved, reshape.OutCollision}}
	sum, err := rw.Apply(cmd.Context(), f.options(pp))
	if err != nil && sum.Scanned == 0 {
		return err
	}
	// err, past here, names items the sweep skipped: the summary comes first.
	w := cmd.OutOrStdout()
	verb := ""
	if f.dryRun {
		verb = "dry run: would have "
	}
	c := sum.Counts
	fmt.Fprintf(w, "sweep: %d segments, %d items scanned in %s%s\n", sum.Segments, sum.Scanned, sum.Elapsed.Round(time.Millisecond), map[bool]string{true: ", resumed"}[sum.Resumed])
	fmt.Fprintf(w, "  %scopied %d, repaired %d, removed %d orphans; equal %d, collisions %d, not derivable %d, gone %d, contended %d, condition retries %d\n",
		verb, c[reshape.OutCopied], c[reshape.OutRepaired], c[reshape.OutOrphanRemoved], c[reshape.OutEqual], c[reshape.OutCollision], c[reshape.OutNotDerivable], c[reshape.OutGone], c[reshape.OutContended], c["retries"])
	if !f.dryRun {
		fmt.Fprintf(w, "  %.1f write capacity units\n", sum.WriteUnits)
	}
	for _, p := range rw.Problems() {
		fmt.Fprintf(w, "  %s %s: %s\n", p.State, p.Key, p.Detail)
	}
	fmt.Fprintf(w, "next: lake reshape verify %s\n", specPath)
	return err
}

func runRewriteVerify(cmd *cobra.Command, g *globalOptions, o *reshapeOptions, spec *reshape.Spec, specPath string, vo reshapeVerifyOptions) error {
	rw, state, err := o.rewriter(cmd, g, spec, specPath, vo.state)
	if err != nil {
		return err
	}
	defer state.Close()
	pp := &progressPrinter{w: cmd.ErrOrStderr(), verb: "verify"}
	rep, err := rw.VerifyRewrite(cmd.Context(), reshape.VerifyOptions{Segments: vo.segments, PageSize: vo.pageSize, List: max(vo.list, reshape.DefaultList), Progress: pp.report})
	if err != nil {
		return err
	}
	if vo.report == "" {
		vo.report = reshape.BesideSpec(specPath, reshape.ReportSuffix)
	}
	if err := reshape.WriteReport(vo.report, rep); err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if vo.json {
		if err := printJSON(w, rep); err != nil {
			return err
		}
	} else {
		printRewriteVerify(w, rep, vo.list, vo.report)
	}
	return rep.Err()
}

func printRewriteVerify(w io.Writer, rep *reshape.RewriteReport, list int, path string) {
	c := rep.Counts
	fmt.Fprintf(w, "table %s, key rewrite (phase %s): %d items scanned\n", rep.Table, rep.Phase, rep.Scanned)
	fmt.Fprintf(w, "  equal %d, missing %d, different %d, orphans %d, collisions %d, not derivable %d\n",
		c[reshape.OutEqual], c[reshape.OutMissing], c[reshape.OutDifferent], c[reshape.OutOrphan], c[reshape.OutCollision], c[reshape.OutNotDerivable])
	for i, p := range rep.Problems {
		if i == list {
			fmt.Fprintf(w, "  … (%s holds more)\n", path)
			break
		}
		fmt.Fprintf(w, "  %s %s: %s\n", p.State, p.Key, p.Detail)
	}
	fmt.Fprintf(w, "report: %s\n", path)
	if rep.Clean {
		fmt.Fprintf(w, "every copy equal: recorded; finalize may delete the old items\n")
	} else {
		fmt.Fprintf(w, "not clean: run lake reshape apply, then verify again\n")
	}
}

func newReshapeFinalizeCommand(g *globalOptions, o *reshapeOptions) *cobra.Command {
	var f rewriteFlags
	cmd := &cobra.Command{
		Use:   "finalize SPEC",
		Short: "Key rewrite: delete the old items once verify found every copy equal",
		Long: `The last step of a key rewrite (kind rewrite-key). Refused unless the last verify,
recorded in the --state store, found every copy equal. It records the phase
"finalizing" (the Go helpers then write the new key alone and still fall back to
the old key on read), waits --settle so every helper has seen it, and sweeps the
table: each old item is deleted in one TransactWriteItems conditioned on it being
unchanged since read and on its copy being equal, which loses the marker in the
same transaction; orphaned copies are removed as apply does. An old item whose
copy is missing or different (an old writer changed it after verify) is
skipped: finalize then exits 6, and apply, verify, finalize converge.

It sweeps again until a whole pass writes nothing, then records "finalized": the
helpers read the new key alone. Killed at any point and run again, it resumes.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRewriteEnd(cmd, g, o, args[0], f, reshape.EndFinalize)
		},
	}
	f.add(cmd, true)
	return cmd
}

func newReshapeRollbackCommand(g *globalOptions, o *reshapeOptions) *cobra.Command {
	var f rewriteFlags
	cmd := &cobra.Command{
		Use:   "rollback SPEC",
		Short: "Key rewrite: delete the copies and leave the table as it was (before finalize)",
		Long: `Undo a key rewrite (kind rewrite-key) before finalize: record the phase
"rolling-back" (the Go helpers then write and read the old key alone), wait
--settle, and sweep the table deleting every copy, each in one TransactWriteItems
conditioned on the copy and its old item being as read. It sweeps again until a
whole pass writes nothing, then records "rolled-back"; apply may start again
later. Refused once finalize has begun. Killed and run again, it resumes.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRewriteEnd(cmd, g, o, args[0], f, reshape.EndRollback)
		},
	}
	f.add(cmd, true)
	return cmd
}

func runRewriteEnd(cmd *cobra.Command, g *globalOptions, o *reshapeOptions, specPath string, f rewriteFlags, end reshape.End) error {
	if f.maxWCU < 0 || f.workers < 0 {
		return usagef("--max-wcu and --workers must not be negative")
	}
	spec, err := loadSpec(specPath)
	if err != nil {
		return err
	}
	if err := spec.RequireRewrite(specPath, string(end)); err != nil {
		return err
	}
	rw, state, err := o.rewriter(cmd, g, spec, specPath, f.state)
	if err != nil {
		return err
	}
	defer state.Close()
	work := end.Work()
	pp := &progressPrinter{w: cmd.ErrOrStderr(), verb: string(end), names: []string{work, reshape.OutOrphanRemoved, reshape.OutSkipped}}
	res, err := rw.End(cmd.Context(), end, f.options(pp))
	w := cmd.OutOrStdout()
	c := res.Counts()
	fmt.Fprintf(w, "%s: %d passes; %s %d, orphans removed %d, skipped %d, gone %d, contended %d; phase %s\n",
		end, len(res.Passes), work, c[work], c[reshape.OutOrphanRemoved], c[reshape.OutSkipped], c[reshape.OutGone], c[reshape.OutContended], res.Phase)
	return err
}

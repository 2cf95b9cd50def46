package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lakemeta/lake/bench/syncload"
	"github.com/lakemeta/lake/bench/syncreport"
	"github.com/spf13/cobra"
)

type benchSyncOptions struct {
	cfg       syncload.Config
	mode      string
	pull      string
	lock      string
	commit    string
	models    string
	catalog   string
	lifecycle string
	scenario  string
	budget    time.Duration
	processes int
	out       string
	// durationSet is whether --duration was given: with --iterations and
	// without it, the iterations alone bound the run.
	durationSet bool
}

func newBenchSyncCommand(g *globalOptions) *cobra.Command {
	o := benchSyncOptions{cfg: syncload.DefaultConfig()}
	cmd := &cobra.Command{
		Use:   "sync",
		Short: "Load-test the sync loop of seed 004 with switches that bring back each of its bottlenecks; writes a report of time series and charts",
		Long: `Run --workers workers, each looping over seed 004's iteration through the sync
engine for --iterations or --duration on the datastore of --store:
INSTANCE=wW-iI: create a disposable model (its definition and a method run
writing --files files of --file-size bytes), sync; delete the model, sync; and,
with --lifecycle prune, prune its data in a sync of its own (the seed's
prune --force), or with --lifecycle on let the namespace's lifecycle drop the
deleted model during the delete's sync (issue 19's fix). --mode
write-stress instead rewrites one model's files per worker on every iteration.

Each bottleneck of the seed is a switch (see docs/bench-sync.md):
  --pull full          every pull also reads everything and filters it
                       client-side: on DynamoDB the seed's GSI partition FILE
                       (a table TABLE_gsifeed kept beside), elsewhere the
                       whole listing; --pull full-filter (DynamoDB) is the
                       seed's quick patch, a FilterExpression
  --lock global        one lock for every worker instead of one per namespace
  --commit full        every commit rewrites the namespace's whole index
  --models long-lived  one model per worker whose data accumulates
  --catalog export     every sync reads the whole catalog of every namespace
                       (vs incremental: only its changes; none: no catalog)
  --lifecycle off      deleted models' data stays (vs prune: the harness
                       deletes it; on: the namespace's lifecycle drops it)

Every --interval it aggregates iterations/s, per-step latency (lock wait, pull,
work, push, commit, catalog, prune), requests and items read and written per
sync, lock timeouts, errors, catalog and index sizes and the hottest key's
share of requests, prints a progress line on stderr, and at the end writes
--out DIR: series.csv, chart-*.png and chart-*.svg, and index.html (opens
offline).

--scenario seed004 runs the seed's five configurations in turn (every
bottleneck on, then each fix added: feed pull, lock per namespace, commit of
changed entries only, catalog incremental and lifecycle), each for a fifth of
--budget on a fresh datastore beside --store (bolt://P-cN, dynamodb://T-cN,
s3://B/P-cN), and draws the five curves on each chart. --scenario lock-floor
runs the global lock at --workers and at twice as many.

--processes P runs the workers in P child processes, on DynamoDB, S3 or a
node (a bolt file is one process's: run ` + "`lake serve`" + ` on it and use --store
http://HOST:PORT). The datastore of a single run must hold no files.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.durationSet = cmd.Flags().Changed("duration")
			return runBenchSync(cmd, g, &o)
		},
	}
	f := cmd.Flags()
	c := &o.cfg
	f.IntVar(&c.Workers, "workers", c.Workers, "concurrent workers")
	f.IntVar(&c.Iterations, "iterations", 0, "iterations per worker (0: run for --duration)")
	f.DurationVar(&c.Duration, "duration", c.Duration, "how long to run (0: run --iterations)")
	f.DurationVar(&c.Interval, "interval", c.Interval, "width of one row of the time series")
	f.IntVar(&c.Files, "files", c.Files, "data files a method run writes (plus the model's definition)")
	f.IntVar(&c.FileSize, "file-size", c.FileSize, "bytes of each data file")
	f.StringVar(&o.mode, "mode", string(c.Mode), "loop (the seed's loop) or write-stress (one model per worker, continuous writes)")
	f.StringVar(&o.pull, "pull", string(c.Pull), "feed (only what changed), full (also read everything, filtered client-side: on DynamoDB the seed's one GSI partition) or full-filter (DynamoDB: the same read with the filter in the query)")
	f.StringVar(&o.lock, "lock", string(c.Lock), "namespace (a lock per worker) or global (one lock)")
	f.StringVar(&o.commit, "commit", string(c.Commit), "changed (only the changed entries) or full (rewrite the namespace's whole index)")
	f.StringVar(&o.models, "models", string(c.Models), "disposable (a model per iteration) or long-lived (a model per worker)")
	f.StringVar(&c.ModelType, "model-type", "bench", "type of the workers' models, one segment or more (the seed's: @webframp/system): a model is data/TYPE/wW-iI/…")
	f.StringVar(&o.catalog, "catalog", string(c.Catalog), "export (read the whole catalog on every sync), incremental or none")
	f.StringVar(&o.lifecycle, "lifecycle", string(c.Lifecycle), "off (deleted models' data stays), prune (the harness deletes it each iteration) or on (the namespace's lifecycle drops the deleted model)")
	f.DurationVar(&c.Lease, "lease", c.Lease, "sync lock lease")
	f.DurationVar(&c.Wait, "wait", c.Wait, "longest lock wait; a wait that runs out is a lock timeout")
	f.StringVar(&o.scenario, "scenario", "", "seed004 (the seed's five configurations) or lock-floor (global lock at N and 2N workers)")
	f.DurationVar(&o.budget, "budget", 10*time.Minute, "a scenario's total time, split evenly among its configurations")
	f.IntVar(&o.processes, "processes", 0, "run the workers in this many child processes (DynamoDB, S3 or a node; not bolt)")
	f.StringVar(&o.out, "out", "bench-sync-report", "directory of the report")
	cmd.AddCommand(newBenchSyncWorkerCommand(g))
	return cmd
}

func (o *benchSyncOptions) config() (syncload.Config, error) {
	c := o.cfg
	c.Mode, c.Pull, c.Lock, c.Commit = syncload.Mode(o.mode), syncload.Pull(o.pull), syncload.LockScope(o.lock), syncload.Commit(o.commit)
	c.Models, c.Catalog, c.Lifecycle = syncload.Models(o.models), syncload.CatalogMode(o.catalog), syncload.LifecycleMode(o.lifecycle)
	if c.Iterations > 0 && !o.durationSet {
		c.Duration = 0 // --iterations alone bounds the run
	}
	c.Name = fmt.Sprintf("pull=%s lock=%s commit=%s models=%s catalog=%s lifecycle=%s", c.Pull, c.Lock, c.Commit, c.Models, c.Catalog, c.Lifecycle)
	if c.Mode == syncload.ModeWriteStress {
		c.Name = "write-stress " + c.Name
	}
	if err := c.Validate(); err != nil {
		return c, usagef("%v", err)
	}
	return c, nil
}

// plan is the configurations to run, each with its store URL.
func (o *benchSyncOptions) plan(store string) ([]syncload.Config, []string, error) {
	base, err := o.config()
	if err != nil {
		return nil, nil, err
	}
	var cfgs []syncload.Config
	switch o.scenario {
	case "":
		return []syncload.Config{base}, []string{store}, nil
	case "seed004":
		if o.budget <= 0 {
			return nil, nil, usagef("--budget must be positive")
		}
		cfgs = syncload.Seed004(base, o.budget/5)
	case "lock-floor":
		if o.budget <= 0 {
			return nil, nil, usagef("--budget must be positive")
		}
		cfgs = syncload.LockFloor(base, o.budget/2)
	default:
		return nil, nil, usagef("--scenario %q: want seed004 or lock-floor", o.scenario)
	}
	if o.processes > 0 {
		return nil, nil, usagef("--scenario runs each configuration on a fresh datastore of its own, which a node cannot give: drop --processes")
	}
	urls := make([]string, len(cfgs))
	for i := range cfgs {
		if urls[i], err = syncload.ConfigStoreURL(store, i+1); err != nil {
			return nil, nil, usagef("%v", err)
		}
	}
	return cfgs, urls, nil
}

func runBenchSync(cmd *cobra.Command, g *globalOptions, o *benchSyncOptions) error {
	if g.store == "" {
		return usagef("bench sync needs --store (bolt://PATH, dynamodb://TABLE, s3://BUCKET/PREFIX or http://HOST:PORT of a node)")
	}
	if o.processes > 0 && strings.HasPrefix(g.store, "bolt://") {
		return usagef("--processes needs a datastore that several processes share, and a bolt file is one process's: run `lake serve` on it and use --store http://HOST:PORT")
	}
	cfgs, urls, err := o.plan(g.store)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	stderr := cmd.ErrOrStderr()
	// Refuse before running anything: every configuration starts empty.
	// This also creates what the runs need (tables, buckets, the seed's
	// index), once, before any worker process starts.
	for i, u := range urls {
		if cfgs[i].Pull == syncload.PullFullFilter && !strings.HasPrefix(u, "dynamodb://") {
			return usagef("--pull full-filter is a DynamoDB FilterExpression: it needs --store dynamodb://TABLE")
		}
		if err := checkEmpty(cmd, u, fullPull(cfgs[i])); err != nil {
			return err
		}
	}
	started := time.Now()
	var runs []syncreport.Run
	for i, cfg := range cfgs {
		fmt.Fprintf(stderr, "bench sync: configuration %d/%d %q on %s (%s)\n", i+1, len(cfgs), cfg.Name, urls[i], cfg.Summary())
		samples, err := runOne(cmd, g, o, cfg, urls[i], stderr)
		if err != nil && (ctx.Err() == nil || len(samples) == 0) {
			return err
		}
		// Interrupted: the report still gets what was measured.
		runs = append(runs, syncreport.Run{Config: cfg, Rows: syncload.Series(cfg, samples, cfg.Interval)})
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "bench sync: interrupted; writing the report of what ran\n")
			break
		}
	}
	title := "lake bench sync"
	if o.scenario != "" {
		title += " --scenario " + o.scenario
	}
	sums, err := syncreport.Write(o.out, syncreport.Meta{Title: title, Store: g.store, Command: "lake " + strings.Join(commandLine(), " "),
		Started: started, Elapsed: time.Since(started).Round(time.Second)}, runs)
	if err != nil {
		return err
	}
	printSummaries(cmd.OutOrStdout(), sums)
	var ran []syncload.Config
	for _, r := range runs {
		ran = append(ran, r.Config)
	}
	printMinimums(cmd.OutOrStdout(), ran, sums, g.store)
	fmt.Fprintf(cmd.OutOrStdout(), "report: %s\n", filepath.Join(o.out, "index.html"))
	return ctx.Err()
}

func checkEmpty(cmd *cobra.Command, url string, full bool) error {
	s, _, err := syncload.OpenData(cmd.Context(), url, true, full)
	if err != nil {
		return err
	}
	defer s.Close()
	p, err := s.List(cmd.Context(), "", 1, "")
	if err != nil {
		return err
	}
	if len(p.Files) > 0 || p.Cursor != "" {
		return usagef("bench sync needs a datastore without files (%s holds some): its curves start from empty", url)
	}
	return nil
}

// runOne runs one configuration and returns its samples, printing a
// progress line on stderr every interval.
func runOne(cmd *cobra.Command, g *globalOptions, o *benchSyncOptions, cfg syncload.Config, url string, stderr io.Writer) ([]syncload.Sample, error) {
	ctx := cmd.Context()
	var mu sync.Mutex
	var samples []syncload.Sample
	p := newProgress(stderr, cfg)
	emit := func(s syncload.Sample) {
		mu.Lock()
		samples = append(samples, s)
		mu.Unlock()
		p.add(s)
	}
	stop := p.start()
	defer stop()
	if o.processes > 0 {
		command, err := syncload.ExecCommand(ctx, []string{"--store", url, "bench", "sync", "worker"})
		if err != nil {
			return nil, err
		}
		err = syncload.RunProcesses(ctx, cfg, o.processes, command, stderr, emit)
		return samples, err
	}
	s, fi, err := syncload.OpenData(ctx, url, true, fullPull(cfg))
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ids := make([]int, cfg.Workers)
	for i := range ids {
		ids[i] = i
	}
	err = syncload.RunWorkers(ctx, cfg, syncload.Env{Driver: s.Driver(), FullIndex: fi, Layout: s.Layout()}, ids, time.Now(), emit)
	return samples, err
}

func newBenchSyncWorkerCommand(g *globalOptions) *cobra.Command {
	var config, ids, start string
	cmd := &cobra.Command{
		Use:    "worker",
		Short:  "A worker process of `lake bench sync --processes` (internal): prints one JSON sample per iteration",
		Hidden: true,
		Args:   exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, list, t0, err := syncload.ParseWorkerArgs(config, ids, start)
			if err != nil {
				return usagef("%v", err)
			}
			s, fi, err := syncload.OpenData(cmd.Context(), g.store, false, fullPull(cfg))
			if err != nil {
				return err
			}
			defer s.Close()
			return syncload.ServeWorkers(cmd.Context(), cfg, syncload.Env{Driver: s.Driver(), FullIndex: fi, Layout: s.Layout()}, list, t0, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&config, "config-json", "", "the run's configuration, as JSON")
	cmd.Flags().StringVar(&ids, "ids", "", "this process's worker numbers, comma-separated")
	cmd.Flags().StringVar(&start, "start", "", "the run's start, Unix nanoseconds")
	return cmd
}

func fullPull(c syncload.Config) bool {
	return c.Pull == syncload.PullFull || c.Pull == syncload.PullFullFilter
}

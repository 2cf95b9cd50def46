package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lakemeta/lake/datastore/catalog"
	"github.com/lakemeta/lake/internal/reqcount"
	"github.com/spf13/cobra"
)

// processLoopOptions are lake bench process-loop's flags.
type processLoopOptions struct {
	workers, files, reports int
	duration, horizon       time.Duration
}

// processSync is one `lake data sync` the loop ran: when it ended (since
// the start), the requests it sent (counted on the wire), how long it took.
type processSync struct {
	at       time.Duration
	requests int
	took     time.Duration
}

func newBenchProcessLoopCommand(g *globalOptions) *cobra.Command {
	var o processLoopOptions
	cmd := &cobra.Command{
		Use:   "process-loop",
		Short: "Run seed 004's loop with every sync a new lake process, and print requests per sync over time",
		Long: `Run seed 004's loop as its workers did: every sync is a new ` + "`lake data sync`" + `
process (so nothing a process keeps in memory helps the next one), with the
catalog and each namespace's lifecycle on (retention 0, --horizon), for
--duration. Each of --workers workers has its own directory and namespace
(bench-wN); an iteration writes the model bench/wN-iI (its model.yaml and
--files data files), syncs, deletes the model's definition and syncs again,
so the lifecycle prunes it and its catalog rows, and reclaims.

Each worker's processes reach the store through their own counting proxy
(the store's endpoint comes from AWS_ENDPOINT_URL_S3 for s3:// or
AWS_ENDPOINT_URL_DYNAMODB for dynamodb://, and must not be in the URL), so
each sync's requests are counted on the wire. It prints, at --reports points,
the syncs of that interval and their requests (mean, max) and seconds
(mean), then the mean of the first tenth of the syncs against the last
tenth: flat means what each sync reads does not grow with the run (issue
28, row 6: compaction's record of what it read is kept in the store).
The store should be a fresh one. See docs/s3.md.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.workers < 1 || o.files < 1 || o.reports < 1 || o.duration <= 0 {
				return usagef("--workers, --files and --reports must be at least 1, --duration positive")
			}
			env := ""
			switch {
			case strings.HasPrefix(g.store, "s3://"):
				env = "AWS_ENDPOINT_URL_S3"
			case strings.HasPrefix(g.store, "dynamodb://"):
				env = "AWS_ENDPOINT_URL_DYNAMODB"
			default:
				return usagef("bench process-loop needs an s3:// or dynamodb:// store (it counts requests with a proxy before the store's endpoint)")
			}
			if strings.Contains(g.store, "endpoint=") || os.Getenv(env) == "" {
				return usagef("bench process-loop takes the store's endpoint from %s (set it; no endpoint= in the URL)", env)
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("lake: %v", err)
			}
			return processLoop(cmd.Context(), cmd.OutOrStdout(), self, g.store, env, o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.workers, "workers", 4, "workers running the loop at once, each in its own namespace")
	f.IntVar(&o.files, "files", 5, "data files each iteration writes")
	f.IntVar(&o.reports, "reports", 10, "rows printed over the run")
	f.DurationVar(&o.duration, "duration", 5*time.Minute, "how long the loop runs")
	f.DurationVar(&o.horizon, "horizon", 20*time.Second, "the lifecycle's tombstone horizon")
	return cmd
}

// processLoop runs the loop and prints its figures.
func processLoop(ctx context.Context, w io.Writer, self, store, env string, o processLoopOptions) error {
	root, err := os.MkdirTemp("", "lake-process-loop-")
	if err != nil {
		return fmt.Errorf("lake: %v", err)
	}
	defer os.RemoveAll(root)
	target := os.Getenv(env)
	run := func(ctx context.Context, dir, endpoint string, args ...string) error {
		c := exec.CommandContext(ctx, self, append([]string{"--store", store}, args...)...)
		c.Dir = dir
		c.Env = append(os.Environ(), "LAKE_STORE=", env+"="+endpoint)
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		if err := c.Run(); err != nil {
			return fmt.Errorf("lake: %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
		}
		return nil
	}
	if err := run(ctx, root, target, "data", "init"); err != nil {
		return err
	}
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		syncs []processSync
		first error
	)
	var wg sync.WaitGroup
	for wi := range o.workers {
		wg.Go(func() {
			err := processWorker(ctx, root, target, wi, o, start, run, func(s processSync) {
				mu.Lock()
				syncs = append(syncs, s)
				mu.Unlock()
			})
			if err != nil && ctx.Err() == nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	fmt.Fprintf(w, "%d workers, each sync a new process, %d data files per model, lifecycle on (horizon %v), %v on %s\n\n",
		o.workers, o.files, o.horizon, o.duration, store)
	printProcessLoop(w, syncs, o)
	return nil
}

// processWorker runs worker wi's iterations until the loop's duration is
// over, reporting each sync.
func processWorker(ctx context.Context, root, target string, wi int, o processLoopOptions, start time.Time,
	run func(context.Context, string, string, ...string) error, report func(processSync)) error {
	p, err := reqcount.Start(target)
	if err != nil {
		return err
	}
	defer p.Close()
	dir := filepath.Join(root, fmt.Sprintf("w%d", wi))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("lake: %v", err)
	}
	ns := fmt.Sprintf("bench-w%d", wi)
	if err := run(ctx, dir, p.URL, "data", "lifecycle", "--namespace", ns, "--enable", "--retention", "0s", "--horizon", o.horizon.String()); err != nil {
		return err
	}
	sync := func() error {
		p.Take()
		t0 := time.Now()
		if err := run(ctx, dir, p.URL, "data", "sync", "--namespace", ns); err != nil {
			return err
		}
		report(processSync{at: time.Since(start), requests: p.Take().Total(), took: time.Since(t0)})
		return nil
	}
	for it := 0; time.Since(start) < o.duration; it++ {
		model := fmt.Sprintf("bench/w%d-i%d", wi, it)
		content := map[string]string{catalog.DefinitionPath(model): "type: bench\n"}
		for f := range o.files {
			content[fmt.Sprintf("data/%s/out%d/1/raw", model, f)] = fmt.Sprintf("%s %d\n", model, f)
		}
		for p, c := range content {
			name := filepath.Join(dir, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				return fmt.Errorf("lake: %v", err)
			}
			if err := os.WriteFile(name, []byte(c), 0o644); err != nil {
				return fmt.Errorf("lake: %v", err)
			}
		}
		if err := sync(); err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(dir, filepath.FromSlash(catalog.DefinitionPath(model)))); err != nil {
			return fmt.Errorf("lake: %v", err)
		}
		if err := sync(); err != nil {
			return err
		}
	}
	return nil
}

// printProcessLoop prints the syncs by interval, then the first tenth
// against the last.
func printProcessLoop(w io.Writer, syncs []processSync, o processLoopOptions) {
	slices.SortFunc(syncs, func(a, b processSync) int { return int(a.at - b.at) })
	mean := func(ss []processSync) (req, maxReq float64, secs float64) {
		if len(ss) == 0 {
			return 0, 0, 0
		}
		for _, s := range ss {
			req += float64(s.requests)
			maxReq = max(maxReq, float64(s.requests))
			secs += s.took.Seconds()
		}
		return req / float64(len(ss)), maxReq, secs / float64(len(ss))
	}
	fmt.Fprintf(w, "%-17s %6s %14s %13s %14s\n", "interval", "syncs", "requests/sync", "max requests", "seconds/sync")
	step := o.duration / time.Duration(o.reports)
	for i := range o.reports {
		lo, hi := step*time.Duration(i), step*time.Duration(i+1)
		if i == o.reports-1 {
			hi = 1<<63 - 1 // the syncs that ended after the duration too
		}
		var in []processSync
		for _, s := range syncs {
			if s.at >= lo && s.at < hi {
				in = append(in, s)
			}
		}
		r, m, sec := mean(in)
		fmt.Fprintf(w, "%-17s %6d %14.1f %13.0f %14.2f\n", fmt.Sprintf("%v–%v", lo.Round(time.Second), (lo+step).Round(time.Second)), len(in), r, m, sec)
	}
	n := len(syncs) / 10
	if n == 0 {
		fmt.Fprintf(w, "\n%d syncs: too few for tenths\n", len(syncs))
		return
	}
	fr, _, fs := mean(syncs[:n])
	lr, _, ls := mean(syncs[len(syncs)-n:])
	fmt.Fprintf(w, "\n%d syncs; first tenth (%d): %.1f requests, %.2f s a sync; last tenth (%d): %.1f requests, %.2f s a sync; ratio %.2f×\n",
		len(syncs), n, fr, fs, n, lr, ls, lr/max(fr, 1))
}

package bench

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
)

// ProcessLoopConfig is lake bench process-loop's run: Workers workers for
// Duration, each iteration's model with Files data files, the lifecycle's
// tombstone horizon, Reports rows printed; Self is the lake binary each
// sync runs, Store the --store URL and Env the variable naming the
// store's endpoint (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL_DYNAMODB),
// which each worker's processes get pointed at its counting proxy.
type ProcessLoopConfig struct {
	Workers, Files, Reports int
	Duration, Horizon       time.Duration
	Self, Store, Env        string
}

// ProcessSync is one `lake data sync` the loop ran: when it ended (since
// the start), the requests it sent (counted on the wire), how long it took.
type ProcessSync struct {
	At       time.Duration
	Requests int
	Took     time.Duration
}

// RunProcessLoop runs seed 004's loop with every sync a new lake process
// (o.Self, the lake binary) against o.Store, each worker's processes
// counted through their own proxy before the endpoint in o.Env, and prints
// its figures to w (PrintProcessLoop).
func RunProcessLoop(ctx context.Context, w io.Writer, o ProcessLoopConfig) error {
	self, store, env := o.Self, o.Store, o.Env
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
		syncs []ProcessSync
		first error
	)
	var wg sync.WaitGroup
	for wi := range o.Workers {
		wg.Go(func() {
			err := processLoopWorker(ctx, root, target, wi, o, start, run, func(s ProcessSync) {
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
		o.Workers, o.Files, o.Horizon, o.Duration, store)
	PrintProcessLoop(w, syncs, o)
	return nil
}

// processLoopWorker runs worker wi's iterations until the loop's duration is
// over, reporting each sync.
func processLoopWorker(ctx context.Context, root, target string, wi int, o ProcessLoopConfig, start time.Time,
	run func(context.Context, string, string, ...string) error, report func(ProcessSync)) error {
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
	if err := run(ctx, dir, p.URL, "data", "lifecycle", "--namespace", ns, "--enable", "--retention", "0s", "--horizon", o.Horizon.String()); err != nil {
		return err
	}
	sync := func() error {
		p.Take()
		t0 := time.Now()
		if err := run(ctx, dir, p.URL, "data", "sync", "--namespace", ns); err != nil {
			return err
		}
		report(ProcessSync{At: time.Since(start), Requests: p.Take().Total(), Took: time.Since(t0)})
		return nil
	}
	for it := 0; time.Since(start) < o.Duration; it++ {
		model := fmt.Sprintf("bench/w%d-i%d", wi, it)
		content := map[string]string{catalog.DefinitionPath(model): "type: bench\n"}
		for f := range o.Files {
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

// PrintProcessLoop prints the syncs by interval (o.Reports rows over
// o.Duration), then the first tenth against the last.
func PrintProcessLoop(w io.Writer, syncs []ProcessSync, o ProcessLoopConfig) {
	slices.SortFunc(syncs, func(a, b ProcessSync) int { return int(a.At - b.At) })
	mean := func(ss []ProcessSync) (req, maxReq float64, secs float64) {
		if len(ss) == 0 {
			return 0, 0, 0
		}
		for _, s := range ss {
			req += float64(s.Requests)
			maxReq = max(maxReq, float64(s.Requests))
			secs += s.Took.Seconds()
		}
		return req / float64(len(ss)), maxReq, secs / float64(len(ss))
	}
	fmt.Fprintf(w, "%-17s %6s %14s %13s %14s\n", "interval", "syncs", "requests/sync", "max requests", "seconds/sync")
	step := o.Duration / time.Duration(o.Reports)
	for i := range o.Reports {
		lo, hi := step*time.Duration(i), step*time.Duration(i+1)
		if i == o.Reports-1 {
			hi = 1<<63 - 1 // the syncs that ended after the duration too
		}
		var in []ProcessSync
		for _, s := range syncs {
			if s.At >= lo && s.At < hi {
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

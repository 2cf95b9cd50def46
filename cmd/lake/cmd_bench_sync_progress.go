package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/lakemeta/lake/bench/syncload"
	"github.com/lakemeta/lake/bench/syncreport"
)

// progress prints one line on stderr every interval while a configuration
// runs: elapsed time, iterations and their rate since the last line,
// failures, lock timeouts, and the catalog and index sizes.
type progress struct {
	w   io.Writer
	cfg syncload.Config
	t0  time.Time

	mu                          sync.Mutex
	iters, last, errs, timeouts int
	catalog, live               int
	seen                        map[string]bool
}

// maxShownErrors bounds the distinct failures the progress prints.
const maxShownErrors = 5

func newProgress(w io.Writer, cfg syncload.Config) *progress {
	return &progress{w: w, cfg: cfg, t0: time.Now()}
}

func (p *progress) add(s syncload.Sample) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.iters++
	if !s.OK {
		p.errs++
		// The first few distinct failures, as they happen: a rate that
		// falls for a reason should say which.
		if len(p.seen) < maxShownErrors && !p.seen[s.Err] {
			if p.seen == nil {
				p.seen = map[string]bool{}
			}
			p.seen[s.Err] = true
			fmt.Fprintf(p.w, "bench sync: %s: worker %d, iteration %d failed: %s\n", p.cfg.Name, s.Worker, s.Iteration, s.Err)
		}
	}
	if s.LockTimeout {
		p.timeouts++
	}
	p.catalog = max(p.catalog, s.CatalogRows)
	p.live = s.LiveFiles
}

func (p *progress) line() {
	p.mu.Lock()
	defer p.mu.Unlock()
	el := time.Since(p.t0)
	rate := float64(p.iters-p.last) / p.cfg.Interval.Seconds()
	p.last = p.iters
	of := ""
	if p.cfg.Duration > 0 {
		of = "/" + p.cfg.Duration.String()
	}
	fmt.Fprintf(p.w, "bench sync: %s %s%s: %d iterations (%.2f/s), %d failed, %d lock timeouts, catalog %d rows\n",
		p.cfg.Name, el.Round(time.Second), of, p.iters, rate, p.errs, p.timeouts, p.catalog)
}

// start prints a line every interval until the returned function is called.
func (p *progress) start() func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(p.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.line()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// printMinimums prints, for each configuration, lake's cost per sync in
// the last tenth beside the least the work needs (syncreport.Minimum) and
// their ratio: the store's requests, items read and items written.
func printMinimums(w io.Writer, cfgs []syncload.Config, sums []syncreport.Summary, storeURL string) {
	fmt.Fprintf(w, "%-40s %9s %7s %6s %9s %7s %6s %9s %7s %6s\n", "per sync, last tenth", "requests", "minimum", "ratio",
		"read", "minimum", "ratio", "written", "minimum", "ratio")
	ratio := func(v, m float64) float64 {
		if m == 0 {
			return 0
		}
		return v / m
	}
	for i, s := range sums {
		if i >= len(cfgs) {
			break
		}
		req, read, written, ok := syncreport.Minimum(cfgs[i], storeURL)
		if !ok {
			fmt.Fprintf(w, "%-40s %9.1f %7s %6s %9.1f %7s %6s %9.1f %7s %6s\n", trunc(s.Name, 40), s.RequestsLast, "-", "-", s.ReadLast, "-", "-", s.WrittenLast, "-", "-")
			continue
		}
		fmt.Fprintf(w, "%-40s %9.1f %7.1f %5.1f× %9.1f %7.1f %5.1f× %9.1f %7.1f %5.1f×\n", trunc(s.Name, 40),
			s.RequestsLast, req, ratio(s.RequestsLast, req), s.ReadLast, read, ratio(s.ReadLast, read), s.WrittenLast, written, ratio(s.WrittenLast, written))
	}
}

func printSummaries(w io.Writer, sums []syncreport.Summary) {
	fmt.Fprintf(w, "%-40s %10s %7s %8s %10s %10s %6s %10s %10s %10s %10s\n", "configuration", "iterations", "failed", "timeouts",
		"iter/s 1st", "iter/s last", "ratio", "read 1st", "read last", "written 1st", "written last")
	for _, s := range sums {
		fmt.Fprintf(w, "%-40s %10d %7d %8d %10.3f %10.3f %6.2f %10.1f %10.1f %10.1f %10.1f\n", trunc(s.Name, 40), s.Iterations, s.Errors, s.Timeouts,
			s.RateFirst, s.RateLast, s.RateRatio, s.ReadFirst, s.ReadLast, s.WrittenFirst, s.WrittenLast)
	}
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// commandLine is the process's arguments, for the report.
func commandLine() []string {
	out := make([]string, 0, len(os.Args))
	for _, a := range os.Args[1:] {
		if strings.ContainsAny(a, " \t'\"") {
			a = "'" + a + "'"
		}
		out = append(out, a)
	}
	return out
}

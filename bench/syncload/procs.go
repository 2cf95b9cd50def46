package syncload

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// WorkerArgs are the arguments a child process gets after the command
// line of the parent's choosing: the configuration as JSON, its worker ids
// and the run's start (Unix nanoseconds), so that every sample's End is on
// the parent's time line.
func WorkerArgs(cfg Config, ids []int, start time.Time) ([]string, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("lake: %w", err)
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return []string{"--config-json", string(b), "--ids", strings.Join(s, ","), "--start", strconv.FormatInt(start.UnixNano(), 10)}, nil
}

// ParseWorkerArgs reverses WorkerArgs' values.
func ParseWorkerArgs(config, ids, start string) (Config, []int, time.Time, error) {
	var cfg Config
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		return cfg, nil, time.Time{}, fmt.Errorf("lake: --config-json: %w", err)
	}
	var out []int
	for _, f := range strings.Split(ids, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return cfg, nil, time.Time{}, fmt.Errorf("lake: --ids %q: want worker numbers separated by commas", ids)
		}
		out = append(out, n)
	}
	ns, err := strconv.ParseInt(start, 10, 64)
	if err != nil {
		return cfg, nil, time.Time{}, fmt.Errorf("lake: --start %q: want Unix nanoseconds", start)
	}
	return cfg, out, time.Unix(0, ns), nil
}

// ServeWorkers is a child process's side: it runs the workers ids and
// writes each sample to w as one JSON line.
func ServeWorkers(ctx context.Context, cfg Config, env Env, ids []int, start time.Time, w io.Writer) error {
	enc := json.NewEncoder(w)
	var werr error
	err := RunWorkers(ctx, cfg, env, ids, start, func(s Sample) {
		if werr == nil {
			werr = enc.Encode(s)
		}
	})
	if werr != nil {
		return fmt.Errorf("lake: write sample: %w", werr)
	}
	return err
}

// RunProcesses runs cfg's workers in procs child processes: command(args)
// returns the child's command for WorkerArgs args (the parent's executable
// and its hidden worker subcommand). Workers are dealt round-robin. The
// children's stderr goes to stderr; every sample they print is passed to
// emit, one call at a time. A child that fails fails the run.
func RunProcesses(ctx context.Context, cfg Config, procs int, command func(args []string) *exec.Cmd, stderr io.Writer, emit func(Sample)) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if procs < 1 || procs > cfg.Workers {
		return fmt.Errorf("lake: processes %d: want 1 to the number of workers (%d)", procs, cfg.Workers)
	}
	start := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, procs)
	for p := range procs {
		var ids []int
		for w := p; w < cfg.Workers; w += procs {
			ids = append(ids, w)
		}
		args, err := WorkerArgs(cfg, ids, start)
		if err != nil {
			return err
		}
		cmd := command(args)
		cmd.Stderr = stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return fmt.Errorf("lake: %w", err)
		}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("lake: start worker process: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 1<<16), 1<<24)
			for sc.Scan() {
				var s Sample
				if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
					errs[p] = fmt.Errorf("lake: worker process %d: bad sample %q: %w", p, sc.Text(), err)
					continue
				}
				mu.Lock()
				emit(s)
				mu.Unlock()
			}
			if err := cmd.Wait(); err != nil && errs[p] == nil && ctx.Err() == nil {
				errs[p] = fmt.Errorf("lake: worker process %d (workers %v): %w", p, ids, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

// ExecCommand is the usual command for RunProcesses: this executable with
// prefix (the global flags and the worker subcommand's path), then args,
// stopped with the context.
func ExecCommand(ctx context.Context, prefix []string) (func(args []string) *exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("lake: %w", err)
	}
	return func(args []string) *exec.Cmd {
		return exec.CommandContext(ctx, exe, append(append([]string(nil), prefix...), args...)...)
	}, nil
}

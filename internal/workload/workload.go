// Package workload drives concurrent clients doing random contract
// operations on a few key groups, records what they observe for the
// linearizability checker, and walks a live migration through every state
// (v1 → dual → backfill → verify → finalize → v2-authoritative) with client
// restarts in between, all while faults may be injected on the wire.
package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakemeta/lake/internal/lincheck"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
)

// Config shapes a run.
type Config struct {
	Clients      int
	OpsPerClient int
	Groups       int // key groups: one guard and KeysPerGroup targets each
	KeysPerGroup int
	Seed         uint64
	// OpTimeout bounds one operation; a timed-out operation's outcome is
	// unknown.
	OpTimeout time.Duration
}

// Opener opens a store for a client; it is called again after a restart.
type Opener func(ctx context.Context, client int) (*metastore.Store, error)

// Phase is one step the driver takes while the clients run, such as a
// migration step; it is retried until it succeeds or fails for good.
type Phase struct {
	Name string
	Run  func(ctx context.Context) error
	// Restart makes every client reopen its store after the phase.
	Restart bool
	// After, if set, runs once the clients have been told to reopen (for
	// example to stop what they used before).
	After func(ctx context.Context) error
}

// Stats counts what a run did.
type Stats struct {
	Ops         int64
	Unknown     int64
	NoEffect    int64 // of which:
	Paused      int64 // writes paused by the finalization's barrier
	Diverged    int64 // dual writes that found a stale v2 copy (failed closed)
	Conflicts   int64
	Restarts    int64
	PhaseErrors int64
}

// Run runs the clients and, spread over the run, the phases in order. It
// returns when every client finished its operations and every phase ran.
func Run(ctx context.Context, cfg Config, open Opener, phases []Phase, rec *lincheck.Recorder) (Stats, error) {
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 10 * time.Second
	}
	var st Stats
	var done atomic.Int64
	var generation atomic.Int64
	total := int64(cfg.Clients * cfg.OpsPerClient)
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Clients+1)
	for c := range cfg.Clients {
		wg.Go(func() {
			if err := runClient(ctx, cfg, c, open, rec, &done, &generation, &st); err != nil {
				errs <- fmt.Errorf("client %d: %w", c, err)
			}
		})
	}
	wg.Go(func() {
		for i, ph := range phases {
			// Spread the phases over the run.
			target := total * int64(i+1) / int64(len(phases)+1)
			for done.Load() < target && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			if err := runPhase(ctx, ph, &st); err != nil {
				errs <- fmt.Errorf("phase %s: %w", ph.Name, err)
				return
			}
			if ph.Restart {
				generation.Add(1)
				atomic.AddInt64(&st.Restarts, 1)
			}
			if ph.After != nil {
				if err := ph.After(ctx); err != nil {
					errs <- fmt.Errorf("phase %s: %w", ph.Name, err)
					return
				}
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		return st, err
	}
	return st, nil
}

func runPhase(ctx context.Context, ph Phase, st *Stats) error {
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if err = ph.Run(ctx); err == nil {
			return nil
		}
		// A refusal is final unless the state is merely moving (a gate
		// waiting for peers); anything transient is retried.
		atomic.AddInt64(&st.PhaseErrors, 1)
		if errors.Is(err, metastore.ErrRefused) && attempt > 5 {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

func runClient(ctx context.Context, cfg Config, c int, open Opener, rec *lincheck.Recorder, done, generation *atomic.Int64, st *Stats) error {
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(c)+1))
	s, err := open(ctx, c)
	if err != nil {
		return err
	}
	gen := generation.Load()
	known := map[string]string{} // what this client last saw under a key
	for i := range cfg.OpsPerClient {
		if g := generation.Load(); g != gen {
			s.Close()
			if s, err = open(ctx, c); err != nil {
				return err
			}
			gen = g
		}
		in := nextOp(rng, cfg, c, i, known)
		call := rec.Call()
		octx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
		out, err := apply(octx, s, in)
		cancel()
		if errors.Is(err, metastore.ErrInvalidArgument) || errors.Is(err, metastore.ErrInvalidKey) || errors.Is(err, metastore.ErrInvalidValue) {
			// The workload only makes valid operations: such an error is
			// a bug, not an outcome to check.
			return fmt.Errorf("%s on %q: %w", in.Kind, in.Key, err)
		}
		switch {
		case errors.Is(err, metastore.ErrWritesPaused):
			atomic.AddInt64(&st.Paused, 1)
		case errors.Is(err, dynamostore.ErrDiverged):
			atomic.AddInt64(&st.Diverged, 1)
		}
		rec.Done(c, call, in, out)
		switch {
		case out.Unknown:
			atomic.AddInt64(&st.Unknown, 1)
			delete(known, in.Key)
		case out.NoEffect:
			atomic.AddInt64(&st.NoEffect, 1)
		case out.Conflict:
			atomic.AddInt64(&st.Conflicts, 1)
			delete(known, in.Key)
		case in.Kind == lincheck.Get && out.Found:
			known[in.Key] = out.Value
		case in.Kind == lincheck.Get, in.Kind == lincheck.Delete, in.Kind == lincheck.Guarded && in.Delete:
			delete(known, in.Key)
		default:
			known[in.Key] = in.Value
		}
		atomic.AddInt64(&st.Ops, 1)
		done.Add(1)
	}
	return s.Close()
}

// nextOp draws an operation; values are unique per client and sequence.
func nextOp(rng *rand.Rand, cfg Config, c, seq int, known map[string]string) lincheck.Input {
	g := fmt.Sprintf("g%d", rng.IntN(cfg.Groups))
	guard := g + "/guard"
	key := fmt.Sprintf("%s/k%d", g, rng.IntN(cfg.KeysPerGroup))
	if rng.IntN(2) == 0 {
		// Half the keys live in a high-rate family, to cross shards.
		key = "append-operation/" + key
	}
	val := fmt.Sprintf("c%d-%d", c, seq)
	in := lincheck.Input{Group: g, Key: key, Value: val}
	expect := func(k string) {
		if v, ok := known[k]; ok && rng.IntN(5) > 0 {
			in.Expect = v
		} else {
			in.ExpectAbsent = true
		}
	}
	switch x := rng.IntN(100); {
	case x < 30:
		in.Kind, in.Value = lincheck.Get, ""
		if rng.IntN(4) == 0 {
			in.Key = guard
		}
	case x < 42:
		in.Kind = lincheck.Put
		if rng.IntN(3) == 0 {
			in.Key = guard
		}
	case x < 70:
		in.Kind = lincheck.CAS
		expect(in.Key)
	case x < 80:
		in.Kind, in.Value = lincheck.Delete, ""
		expect(in.Key)
		if in.ExpectAbsent {
			in.ExpectAbsent, in.Expect = false, "c0-0"
		}
	default:
		in.Kind = lincheck.Guarded
		in.GuardKey = guard
		in.GuardValue = known[guard]
		expect(in.Key)
		if !in.ExpectAbsent && rng.IntN(4) == 0 {
			in.Delete, in.Value = true, ""
		}
	}
	return in
}

// apply performs in on s and classifies the outcome.
func apply(ctx context.Context, s *metastore.Store, in lincheck.Input) (lincheck.Output, error) {
	var err error
	expect := metastore.ExpectAbsent()
	if !in.ExpectAbsent {
		expect = metastore.ExpectValue([]byte(in.Expect))
	}
	switch in.Kind {
	case lincheck.Get:
		v, gerr := s.Get(ctx, in.Key)
		if gerr == nil {
			return lincheck.Output{OK: true, Found: true, Value: string(v)}, nil
		}
		if errors.Is(gerr, metastore.ErrNotFound) {
			return lincheck.Output{OK: true}, nil
		}
		return lincheck.Output{Unknown: true}, gerr
	case lincheck.Put:
		err = s.Put(ctx, in.Key, []byte(in.Value))
	case lincheck.CAS:
		err = s.CAS(ctx, in.Key, expect, []byte(in.Value))
	case lincheck.Delete:
		err = s.Delete(ctx, in.Key, []byte(in.Expect))
	case lincheck.Guarded:
		m := metastore.Mutation{Key: in.Key, Expect: expect, Delete: in.Delete}
		if !in.Delete {
			m.Value = []byte(in.Value)
		}
		err = s.GuardedMutate(ctx, metastore.Guard{Key: in.GuardKey, Value: []byte(in.GuardValue)}, m)
	}
	return classify(err), err
}

func classify(err error) lincheck.Output {
	switch {
	case err == nil:
		return lincheck.Output{OK: true}
	case errors.Is(err, metastore.ErrConflict):
		return lincheck.Output{Conflict: true}
	case errors.Is(err, dynamostore.ErrDiverged), errors.Is(err, metastore.ErrWritesPaused), errors.Is(err, metastore.ErrRefused):
		// The transaction was refused as a whole: nothing applied.
		return lincheck.Output{NoEffect: true}
	default:
		return lincheck.Output{Unknown: true}
	}
}

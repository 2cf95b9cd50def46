package server

import (
	"context"
	"fmt"
	"sync"

	"github.com/lakemeta/lake/metastore"
)

// PauseSource is an outside reason to refuse mutations, such as the
// migration's finalization state: the Admission asks every source before
// every mutation, and refuses it while any source says paused.
//
// WritesPaused is on the write path, so it MUST be cheap and MUST NOT block:
// return a state the source keeps current (an atomic, a value refreshed by
// its own poller), never do I/O per call. It MUST NOT call back into the
// Admission.
type PauseSource interface {
	WritesPaused() (paused bool, reason string)
}

// PauseFunc adapts a function to a PauseSource.
type PauseFunc func() (paused bool, reason string)

// WritesPaused calls f.
func (f PauseFunc) WritesPaused() (bool, string) { return f() }

// Admission decides whether the node admits mutations. Reads never consult
// it: a paused node keeps serving reads and its catalog.
//
// Mutations are refused while an operator pause is set (Pause, or POST
// /v1/admin/pause) or while any PauseSource says paused. Admission also
// counts the mutations it admitted that are still running, so that a
// caller that needs "no write in flight" (finalizing a migration) can
// Pause and then WaitIdle: after both return, every mutation either
// finished or will be refused.
//
// An Admission is safe for concurrent use. The zero value is not usable;
// call NewAdmission.
type Admission struct {
	mu       sync.Mutex
	paused   bool
	reason   string
	sources  []PauseSource
	inflight int
	// idle is closed whenever inflight is zero; a new one is made when the
	// first mutation is admitted, so WaitIdle can select on it with a ctx.
	idle chan struct{}
}

// NewAdmission returns an Admission that admits every mutation.
func NewAdmission() *Admission {
	idle := make(chan struct{})
	close(idle)
	return &Admission{idle: idle}
}

// Pause refuses every mutation from now on, with reason in the errors
// (a default when empty), until Resume. Mutations already admitted go on;
// WaitIdle waits for them.
func (a *Admission) Pause(reason string) {
	if reason == "" {
		reason = "paused by an operator"
	}
	a.mu.Lock()
	a.paused, a.reason = true, reason
	a.mu.Unlock()
}

// Resume lifts the operator pause. A PauseSource that still says paused
// keeps refusing mutations.
func (a *Admission) Resume() {
	a.mu.Lock()
	a.paused, a.reason = false, ""
	a.mu.Unlock()
}

// AddSource makes src a reason to refuse mutations, from the next mutation
// on. Sources cannot be removed: a source that no longer applies says so
// by answering false.
func (a *Admission) AddSource(src PauseSource) {
	a.mu.Lock()
	a.sources = append(a.sources, src)
	a.mu.Unlock()
}

// State reports whether mutations are refused now, and why: the operator
// pause first, then the first source that says paused.
func (a *Admission) State() (paused bool, reason string) {
	a.mu.Lock()
	paused, reason = a.paused, a.reason
	sources := a.sources
	a.mu.Unlock()
	if paused {
		return true, reason
	}
	// Sources are asked outside the lock: they are someone else's code.
	for _, s := range sources {
		if p, r := s.WritesPaused(); p {
			if r == "" {
				r = "paused by an external source"
			}
			return true, r
		}
	}
	return false, ""
}

// Check returns nil if a mutation would be admitted now, or an error
// matching metastore.ErrWritesPaused. It admits nothing: use it to refuse
// early (before reading a request body), then Admit.
func (a *Admission) Check() error {
	if paused, reason := a.State(); paused {
		return fmt.Errorf("%w: %s", metastore.ErrWritesPaused, reason)
	}
	return nil
}

// Admit admits one mutation, or returns an error matching
// metastore.ErrWritesPaused. The caller MUST call release exactly once when
// the mutation has finished (extra calls are ignored).
func (a *Admission) Admit() (release func(), err error) {
	// Sources first, outside the lock (see State); the operator pause is
	// checked again under the lock, where it is ordered against Pause, so
	// a mutation admitted here is one that WaitIdle after Pause waits for.
	a.mu.Lock()
	sources := a.sources
	a.mu.Unlock()
	for _, s := range sources {
		if p, r := s.WritesPaused(); p {
			if r == "" {
				r = "paused by an external source"
			}
			return nil, fmt.Errorf("%w: %s", metastore.ErrWritesPaused, r)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.paused {
		return nil, fmt.Errorf("%w: %s", metastore.ErrWritesPaused, a.reason)
	}
	if a.inflight == 0 {
		a.idle = make(chan struct{})
	}
	a.inflight++
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			a.inflight--
			if a.inflight == 0 {
				close(a.idle)
			}
			a.mu.Unlock()
		})
	}, nil
}

// InFlight returns the number of admitted mutations still running.
func (a *Admission) InFlight() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inflight
}

// WaitIdle waits until no admitted mutation is running, or ctx ends. After
// Pause it means every mutation admitted before the pause has finished;
// without a pause, new mutations may start at once.
func (a *Admission) WaitIdle(ctx context.Context) error {
	a.mu.Lock()
	idle := a.idle
	a.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("lake: waiting for %d in-flight mutations: %w", a.InFlight(), ctx.Err())
	}
}

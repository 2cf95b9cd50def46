package syncload

import (
	"context"
	"fmt"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// LifecycleMode is what happens to a deleted model's data.
type LifecycleMode string

// The lifecycle modes.
const (
	// LifecycleOff: a model delete removes its definition; its data stays
	// in the datastore (and in the catalog) for ever.
	LifecycleOff LifecycleMode = "off"
	// LifecyclePrune: after each iteration's delete, the worker deletes
	// the data the iteration left behind (the deleted model's files; for a
	// long-lived model, the previous iteration's version) in a sync of its
	// own: the seed's `data prune --force`, done by the harness.
	LifecyclePrune LifecycleMode = "prune"
	// LifecycleOn: the namespace's own lifecycle (package lifecycle,
	// enabled with retention 0 and a LifecycleHorizon): the delete's sync
	// orphans the model and drops it whole, partition and catalog row;
	// the harness deletes nothing itself.
	LifecycleOn LifecycleMode = "on"
)

// LifecycleHorizon is the tombstone horizon of LifecycleOn: how long the
// catalog's feed keeps the rows of pruned models.
const LifecycleHorizon = 30 * time.Second

// Seed004Lifecycle is the lifecycle of the seed's fifth configuration: the
// fix the seed names, lifecycle management, not prune --force.
const Seed004Lifecycle = LifecycleOn

// Leftover is what an iteration leaves behind once its model is deleted
// (or, long-lived, once its next version is written).
type Leftover struct {
	// Model is the model's partition (TYPE/ID).
	Model string
	// Paths are the data files the iteration wrote, slash-separated,
	// relative to the worker's tree.
	Paths []string
}

// LifecycleStep runs after each iteration's delete sync. Prune returns the
// paths to delete in a sync of their own (timed as the "prune" step); nil
// means nothing to delete.
type LifecycleStep interface {
	// Setup prepares namespace ns of s before the worker's first
	// iteration.
	Setup(ctx context.Context, s *datastore.Store, ns string) error
	Prune(ctx context.Context, l Leftover) ([]string, error)
}

// newLifecycleStep is the one place a lifecycle mode becomes a step.
func newLifecycleStep(m LifecycleMode) (LifecycleStep, error) {
	switch m {
	case LifecycleOff:
		return lifecycleOff{}, nil
	case LifecyclePrune:
		return lifecyclePrune{}, nil
	case LifecycleOn:
		return lifecycleOn{}, nil
	}
	return nil, fmt.Errorf("%w: lifecycle %q: want off, prune or on", metastore.ErrInvalidArgument, m)
}

type lifecycleOff struct{}

func (lifecycleOff) Setup(context.Context, *datastore.Store, string) error { return nil }
func (lifecycleOff) Prune(context.Context, Leftover) ([]string, error)     { return nil, nil }

type lifecyclePrune struct{ lifecycleOff }

func (lifecyclePrune) Prune(_ context.Context, l Leftover) ([]string, error) { return l.Paths, nil }

type lifecycleOn struct{ lifecycleOff }

func (lifecycleOn) Setup(ctx context.Context, s *datastore.Store, ns string) error {
	n, err := s.Namespace(ns)
	if err != nil {
		return err
	}
	_, err = n.SetLifecycle(ctx, datastore.Lifecycle{Enabled: true, Horizon: LifecycleHorizon})
	return err
}

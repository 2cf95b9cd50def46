package syncload

import (
	"context"
	"fmt"

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
)

// Seed004Lifecycle is the lifecycle of the seed's fifth configuration.
//
// HOOK (issue 19): switch it to the datastore's own lifecycle once it
// exists (add its mode below and in newLifecycleStep).
const Seed004Lifecycle = LifecyclePrune

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
	Prune(ctx context.Context, l Leftover) ([]string, error)
}

// newLifecycleStep is the one place a lifecycle mode becomes a step.
//
// HOOK (issue 19): add LifecycleOn, whose step lets the datastore's
// lifecycle prune the deleted model's data (returning nil paths, or the
// paths 19's lifecycle wants removed by the sync).
func newLifecycleStep(m LifecycleMode) (LifecycleStep, error) {
	switch m {
	case LifecycleOff:
		return lifecycleOff{}, nil
	case LifecyclePrune:
		return lifecyclePrune{}, nil
	}
	return nil, fmt.Errorf("%w: lifecycle %q: want off or prune", metastore.ErrInvalidArgument, m)
}

type lifecycleOff struct{}

func (lifecycleOff) Prune(context.Context, Leftover) ([]string, error) { return nil, nil }

type lifecyclePrune struct{}

func (lifecyclePrune) Prune(_ context.Context, l Leftover) ([]string, error) { return l.Paths, nil }

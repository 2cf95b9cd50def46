package reshape

import (
	"context"
	"fmt"

	"github.com/lakemeta/lake/metastore"
)

// Verdict is the outcome of a rewrite's plan for its caller: new keys that
// collide are refused (metastore.ErrRefused: fix the templates or the data
// before apply), then whatever Err says.
func (p *RewritePlan) Verdict() error {
	if len(p.Collisions) > 0 {
		return fmt.Errorf("%w: reshape plan: %d new keys collide: fix the templates (or the data) before apply", metastore.ErrRefused, len(p.Collisions))
	}
	return p.Err()
}

// End names one of the two ends of a key rewrite.
type End string

// The ends of a key rewrite: Finalize deletes the old items, Rollback the
// copies.
const (
	EndFinalize End = "finalize"
	EndRollback End = "rollback"
)

// Work is the sweep outcome that counts the items the end deleted
// (OutMoved for finalize, OutRemoved for rollback).
func (e End) Work() string {
	if e == EndRollback {
		return OutRemoved
	}
	return OutMoved
}

// RequireRewrite refuses (metastore.ErrInvalidArgument) a spec that is not
// a key rewrite, for the steps only a rewrite has; verb names the step.
func (s *Spec) RequireRewrite(specPath, verb string) error {
	if s.Kind != KindRewriteKey {
		return fmt.Errorf("%w: %s is for a key rewrite (kind %q); %s is of kind %q", metastore.ErrInvalidArgument, verb, KindRewriteKey, specPath, s.Kind)
	}
	return nil
}

// End runs Finalize or Rollback.
func (rw *Rewrite) End(ctx context.Context, e End, o RewriteOptions) (EndResult, error) {
	switch e {
	case EndFinalize:
		return rw.Finalize(ctx, o)
	case EndRollback:
		return rw.Rollback(ctx, o)
	}
	return EndResult{}, fmt.Errorf("%w: reshape: no end %q of a key rewrite (want %s or %s)", metastore.ErrInvalidArgument, e, EndFinalize, EndRollback)
}

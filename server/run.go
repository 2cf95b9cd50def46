package server

import (
	"context"
	"errors"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// Run makes the node ready and keeps its catalog fresh until ctx ends: it
// reads a probe key until the store answers (found or not found), then
// refreshes the catalog at once and every CatalogInterval. A failed refresh
// is logged and keeps the last good copy. Run returns nil when ctx ends; it
// must not be called twice.
func (s *Server) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("lake: server: Run called twice")
	}
	if !s.waitReady(ctx) {
		return nil
	}
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.refreshCatalog(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// waitReady reads the probe key with a growing pause (100 ms to the
// catalog interval) until the store answers; false if ctx ended first.
func (s *Server) waitReady(ctx context.Context) bool {
	wait := 100 * time.Millisecond
	for !s.ready.Load() {
		pctx, cancel := context.WithTimeout(ctx, s.timeout)
		_, err := s.store.Get(pctx, readinessProbeKey)
		cancel()
		if err == nil || errors.Is(err, metastore.ErrNotFound) {
			s.markReady()
			break
		}
		if ctx.Err() != nil {
			return false
		}
		s.log.Warn("store not answering yet", "backend", s.store.Driver().Name(), "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, max(s.interval, 100*time.Millisecond))
	}
	return true
}

func (s *Server) markReady() {
	if !s.ready.Swap(true) {
		s.log.Info("ready: the store answered a read", "backend", s.store.Driver().Name())
	}
}

func (s *Server) refreshCatalog(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	start := time.Now()
	pages, err := s.catalog.refresh(rctx)
	took := time.Since(start)
	s.metrics.refreshTime.Observe(took.Seconds())
	s.metrics.refreshPages.Add(float64(pages))
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down; not the store's fault
		}
		s.metrics.refreshes.WithLabelValues("error").Inc()
		snap := s.catalog.snapshot()
		age := "never loaded"
		if snap.loaded {
			age = time.Since(snap.refreshedAt).Round(time.Millisecond).String()
		}
		s.log.Warn("catalog refresh failed; serving the last good copy", "prefix", s.catalog.prefix, "err", err, "copy_age", age)
		return
	}
	s.metrics.refreshes.WithLabelValues("ok").Inc()
	s.markReady()
	s.log.Debug("catalog refreshed", "prefix", s.catalog.prefix, "items", len(s.catalog.snapshot().items), "pages", pages, "duration", took)
}

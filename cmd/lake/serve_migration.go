package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/migrate/nodewatch"
	"github.com/lakemeta/lake/server"
	"github.com/prometheus/client_golang/prometheus"
)

// nodeMigration is what a node on DynamoDB adds to server.Options to follow
// the migration of its table; on another backend it adds nothing.
type nodeMigration struct {
	sources    []server.PauseSource
	collectors []prometheus.Collector
	leave      func()
}

// followMigration joins the node registry of a dynamodb:// store and
// follows the migration: the node pauses writes while a finalization holds
// the barrier and resumes on its own after the marker, and exports the
// migration's state and the store's cost counters. leave leaves the
// registry; a node killed outright drops out when its lease lapses.
func followMigration(ctx context.Context, store *metastore.Store, nodeID, role string, logger *slog.Logger) (nodeMigration, error) {
	d, ok := store.Driver().(*dynamostore.Driver)
	if !ok {
		return nodeMigration{leave: func() {}}, nil
	}
	w, err := nodewatch.Watch(ctx, d, nodeID, role, d.Refresh(), logger)
	if err != nil {
		return nodeMigration{}, err
	}
	return nodeMigration{sources: []server.PauseSource{w}, collectors: w.Collectors(), leave: func() {
		lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := w.Close(lctx); err != nil {
			logger.Warn("leaving the node registry failed; the entry lapses with its lease", "err", err)
		}
	}}, nil
}

// Package nodewatch ties a long-running process (a `lake serve` node) on a
// DynamoDB store to the migration of its table: it heartbeats the node into
// the node registry, answers the node's write admission from memory (writes
// pause while a finalization holds the barrier), and exports the migration's
// state and the store's cost counters as Prometheus metrics. Package server
// knows none of this: it takes the Watcher as a pause source and its
// collectors as extra metrics.
package nodewatch

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/prometheus/client_golang/prometheus"
)

// Watcher ties a node on DynamoDB to the migration: it heartbeats
// the node into the node registry (role, capability, observed state and
// epoch), which also keeps the store's view of the state fresh; it answers
// the node's admission from memory (writes pause while a finalization holds
// the barrier and resume, without a restart, once the marker is observed);
// and it exports the state and the v1-only peer count as metrics.
type Watcher struct {
	d        *dynamostore.Driver
	p        dynamostore.Primitives
	reg      dynamostore.Registry
	log      *slog.Logger
	stopBeat func(context.Context) error
	cancel   context.CancelFunc
	done     chan struct{}

	mu     sync.Mutex
	state  dynamostore.Migration
	v1only int
	err    error
}

// MinLease is the shortest registry lease a node takes.
const MinLease = 3 * time.Second

// Watch starts watching for node id with role ("commit" or "reader"),
// every interval (at most the store's state refresh interval is useful).
func Watch(ctx context.Context, d *dynamostore.Driver, id, role string, interval time.Duration, log *slog.Logger) (*Watcher, error) {
	if role != "commit" && role != "reader" {
		return nil, fmt.Errorf("lake: node role %q: want commit or reader", role)
	}
	if log == nil {
		log = slog.Default()
	}
	w := &Watcher{d: d, p: d.Primitives(), reg: d.Registry(), log: log, done: make(chan struct{})}
	// The lease outlasts a few missed beats on a loaded machine, and never
	// less than MinLease: a node must not flap out of the registry.
	lease := max(3*interval, MinLease)
	stop, err := w.reg.StartHeartbeat(ctx, dynamostore.NodeInfo{ID: id, Role: role, Capability: "dual", Lease: lease}, interval,
		func(err error) { log.Warn("node registry heartbeat failed", "err", err) })
	if err != nil {
		return nil, fmt.Errorf("lake: joining the node registry: %w", err)
	}
	w.stopBeat = stop
	w.poll(ctx)
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.cancel = cancel
	go func() {
		defer close(w.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-t.C:
				w.poll(pctx)
			}
		}
	}()
	return w, nil
}

// poll refreshes the state and the peers.
func (w *Watcher) poll(ctx context.Context) {
	snap, err := w.p.ReadMigration(ctx)
	var v1only int
	if err == nil {
		var nodes []dynamostore.NodeInfo
		nodes, err = w.reg.Nodes(ctx)
		now := time.Now()
		for _, n := range nodes {
			if n.Live(now) && n.V1Only() {
				v1only++
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.err = err
	if err != nil {
		w.log.Warn("reading the migration state failed; keeping the last one", "err", err)
		return
	}
	if w.state.State != snap.State || w.state.Epoch != snap.Epoch {
		w.log.Info("migration state", "state", snap.State, "epoch", snap.Epoch)
	}
	w.state, w.v1only = snap.Migration, v1only
}

// Collectors returns the metrics a node exports for its store: the
// migration's (the Watcher itself) and the store's cost counters.
func (w *Watcher) Collectors() []prometheus.Collector {
	return []prometheus.Collector{w, CostCollector(w.d)}
}

// WritesPaused implements server.PauseSource from memory: a finalization holds
// the write barrier and the marker is not yet published.
func (w *Watcher) WritesPaused() (bool, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state.FinalizingSince != nil && !w.state.ReadsV2() {
		return true, "migration finalization in progress since " + w.state.FinalizingSince.Format(time.RFC3339)
	}
	return false, ""
}

// Close stops the watcher and leaves the registry.
func (w *Watcher) Close(ctx context.Context) error {
	w.cancel()
	<-w.done
	return w.stopBeat(ctx)
}

// states are the label values of lake_migration_state.
var states = []dynamostore.State{dynamostore.StateV1, dynamostore.StateDual, dynamostore.StateBackfill, dynamostore.StateV2Auth, dynamostore.StateV2Only}

// Describe implements prometheus.Collector.
func (w *Watcher) Describe(ch chan<- *prometheus.Desc) {
	ch <- descMigState
	ch <- descMigEpoch
	ch <- descV1Only
	ch <- descFinalizing
}

// Collect implements prometheus.Collector.
func (w *Watcher) Collect(ch chan<- prometheus.Metric) {
	w.mu.Lock()
	st, v1only := w.state, w.v1only
	w.mu.Unlock()
	for _, s := range states {
		ch <- prometheus.MustNewConstMetric(descMigState, prometheus.GaugeValue, b2f(st.State == s), string(s))
	}
	ch <- prometheus.MustNewConstMetric(descMigEpoch, prometheus.GaugeValue, float64(st.Epoch))
	ch <- prometheus.MustNewConstMetric(descV1Only, prometheus.GaugeValue, float64(v1only))
	ch <- prometheus.MustNewConstMetric(descFinalizing, prometheus.GaugeValue, b2f(st.FinalizingSince != nil && !st.ReadsV2()))
}

var (
	descMigState   = prometheus.NewDesc("lake_migration_state", "1 for the migration state the node observes, 0 for the others.", []string{"state"}, nil)
	descMigEpoch   = prometheus.NewDesc("lake_migration_epoch", "The migration epoch the node observes.", nil, nil)
	descV1Only     = prometheus.NewDesc("lake_v1_only_peers", "Live commit-capable peers in the node registry that do not dual-write (must be 0 before finalize).", nil, nil)
	descFinalizing = prometheus.NewDesc("lake_migration_finalizing", "1 while a finalization holds the write barrier without a marker.", nil, nil)
)

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

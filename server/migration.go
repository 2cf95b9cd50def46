package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/lakemeta/lake/backend/dynamostore"
	"github.com/prometheus/client_golang/prometheus"
)

// MigrationWatcher ties a node on DynamoDB to the migration: it heartbeats
// the node into the node registry (role, capability, observed state and
// epoch), which also keeps the store's view of the state fresh; it answers
// the node's admission from memory (writes pause while a finalization holds
// the barrier and resume, without a restart, once the marker is observed);
// and it exports the state and the v1-only peer count as metrics.
type MigrationWatcher struct {
	d        *dynamostore.Driver
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

// WatchMigration starts watching for node id with role ("commit" or
// "reader"), every interval (at most the store's state refresh interval
// is useful).
func WatchMigration(ctx context.Context, d *dynamostore.Driver, id, role string, interval time.Duration, log *slog.Logger) (*MigrationWatcher, error) {
	if role != "commit" && role != "reader" {
		return nil, fmt.Errorf("lake: node role %q: want commit or reader", role)
	}
	if log == nil {
		log = slog.Default()
	}
	w := &MigrationWatcher{d: d, log: log, done: make(chan struct{})}
	// The lease outlasts a few missed beats on a loaded machine, and never
	// less than MinLease: a node must not flap out of the registry.
	lease := max(3*interval, MinLease)
	stop, err := d.StartHeartbeat(ctx, dynamostore.NodeInfo{ID: id, Role: role, Capability: "dual", Lease: lease}, interval,
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
func (w *MigrationWatcher) poll(ctx context.Context) {
	snap, err := w.d.ReadMigration(ctx)
	var v1only int
	if err == nil {
		var nodes []dynamostore.NodeInfo
		nodes, err = w.d.Nodes(ctx)
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

// WritesPaused implements PauseSource from memory: a finalization holds
// the write barrier and the marker is not yet published.
func (w *MigrationWatcher) WritesPaused() (bool, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state.FinalizingSince != nil && !w.state.ReadsV2() {
		return true, "migration finalization in progress since " + w.state.FinalizingSince.Format(time.RFC3339)
	}
	return false, ""
}

// Close stops the watcher and leaves the registry.
func (w *MigrationWatcher) Close(ctx context.Context) error {
	w.cancel()
	<-w.done
	return w.stopBeat(ctx)
}

// states are the label values of lake_migration_state.
var states = []dynamostore.State{dynamostore.StateV1, dynamostore.StateDual, dynamostore.StateBackfill, dynamostore.StateV2Auth, dynamostore.StateV2Only}

// Describe implements prometheus.Collector.
func (w *MigrationWatcher) Describe(ch chan<- *prometheus.Desc) {
	ch <- descMigState
	ch <- descMigEpoch
	ch <- descV1Only
	ch <- descFinalizing
}

// Collect implements prometheus.Collector.
func (w *MigrationWatcher) Collect(ch chan<- prometheus.Metric) {
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

// backendCollector exports a DynamoDB store's cost counters.
type backendCollector struct{ d *dynamostore.Driver }

var (
	descBackendReq  = prometheus.NewDesc("lake_backend_requests_total", "Backend requests for user data, by DynamoDB operation.", []string{"op"}, nil)
	descBackendEval = prometheus.NewDesc("lake_backend_items_evaluated_total", "Items the backend evaluated (ScannedCount; one per point read), by DynamoDB operation.", []string{"op"}, nil)
	descBackendRet  = prometheus.NewDesc("lake_backend_items_returned_total", "Items the backend returned.", nil, nil)
	descBackendCap  = prometheus.NewDesc("lake_backend_capacity_units_total", "Capacity units the backend reported, by kind (read, write).", []string{"kind"}, nil)
	descBackendCtl  = prometheus.NewDesc("lake_backend_control_requests_total", "Backend requests for lake's control records (state, registries).", nil, nil)
)

func (c backendCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBackendReq, descBackendEval, descBackendRet, descBackendCap, descBackendCtl} {
		ch <- d
	}
}

func (c backendCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.d.Stats()
	for op, n := range s.Requests {
		ch <- prometheus.MustNewConstMetric(descBackendReq, prometheus.CounterValue, float64(n), op)
	}
	for op, n := range s.EvaluatedBy {
		ch <- prometheus.MustNewConstMetric(descBackendEval, prometheus.CounterValue, float64(n), op)
	}
	ch <- prometheus.MustNewConstMetric(descBackendRet, prometheus.CounterValue, float64(s.ItemsReturned))
	ch <- prometheus.MustNewConstMetric(descBackendCap, prometheus.CounterValue, s.ReadCapacity, "read")
	ch <- prometheus.MustNewConstMetric(descBackendCap, prometheus.CounterValue, s.WriteCapacity, "write")
	ch <- prometheus.MustNewConstMetric(descBackendCtl, prometheus.CounterValue, float64(s.ControlRequests))
}

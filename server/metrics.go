package server

import (
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the node's Prometheus metrics. Every name starts with lake_.
// NB: names and labels are what dashboards and alerts query; renaming one
// breaks them.
type metrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	refreshes    *prometheus.CounterVec
	refreshTime  prometheus.Histogram
	refreshPages prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, s *Server, extra []prometheus.Collector) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lake_http_requests_total",
			Help: "HTTP requests by operation and outcome (ok, not_modified, or an error code).",
		}, []string{"op", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lake_http_request_duration_seconds",
			Help:    "HTTP request latency by operation and outcome.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"op", "outcome"}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lake_catalog_refreshes_total",
			Help: "Catalog refreshes by outcome (ok or error).",
		}, []string{"outcome"}),
		refreshTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lake_catalog_refresh_duration_seconds",
			Help:    "Time to drain the catalog prefix, successful or not.",
			Buckets: prometheus.ExponentialBuckets(.001, 4, 10),
		}),
		refreshPages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lake_catalog_refresh_pages_total",
			Help: "List pages read by catalog refreshes (the refreshes' whole backend work).",
		}),
	}
	cs := []prometheus.Collector{m.requests, m.duration, m.refreshes, m.refreshTime, m.refreshPages,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lake_catalog_age_seconds",
			Help: "Age of the catalog copy being served; +Inf before the first successful refresh.",
		}, func() float64 {
			snap := s.catalog.snapshot()
			if !snap.loaded {
				return math.Inf(1)
			}
			return time.Since(snap.refreshedAt).Seconds()
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lake_catalog_items",
			Help: "Number of items in the catalog copy being served.",
		}, func() float64 { return float64(len(s.catalog.snapshot().items)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lake_catalog_bytes",
			Help: "Bytes of keys and values in the catalog copy being served.",
		}, func() float64 { return float64(s.catalog.snapshot().bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lake_catalog_max_bytes",
			Help: "The catalog copy's limit in bytes of keys and values; a refresh that finds more fails.",
		}, func() float64 { return float64(s.catalog.maxBytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lake_catalog_last_refresh_failed",
			Help: "1 if the last catalog refresh failed (the last good copy is served), else 0.",
		}, func() float64 { return b2f(s.catalog.snapshot().lastErr != nil) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lake_admission_paused",
			Help: "1 while write admission is paused (by an operator or an external source), else 0.",
		}, func() float64 { p, _ := s.admission.State(); return b2f(p) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lake_admission_in_flight",
			Help: "Admitted mutations still running.",
		}, func() float64 { return float64(s.admission.InFlight()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lake_ready",
			Help: "1 once the store has answered a read (what /readyz reports), else 0.",
		}, func() float64 { return b2f(s.readiness() == nil) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "lake_node_info",
			Help:        "Always 1; labels identify the node and its backend.",
			ConstLabels: prometheus.Labels{"node_id": s.nodeID, "backend": s.store.Driver().Name()},
		}, func() float64 { return 1 }),
	}
	cs = append(cs, extra...)
	for _, c := range cs {
		// Register, not MustRegister: a registry that already holds lake
		// metrics (two nodes on one registry) is an error, not a panic.
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("lake: registering metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) observe(op, outcome string, took time.Duration) {
	m.requests.WithLabelValues(op, outcome).Inc()
	m.duration.WithLabelValues(op, outcome).Observe(took.Seconds())
}

// newRegistry returns a registry with the Go runtime and process metrics,
// for a node that was not given one.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

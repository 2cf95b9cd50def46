package server

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Defaults of Options.
const (
	DefaultCatalogPrefix   = "tbl/"
	DefaultCatalogInterval = 5 * time.Second
	DefaultCatalogTimeout  = 30 * time.Second
	DefaultRetryAfter      = time.Second
	// DefaultBodyTimeout bounds how long a request body may take to
	// arrive: the largest body (1.4 MB) in a minute is 24 KB/s.
	DefaultBodyTimeout = time.Minute
)

// PauseDrainTimeout bounds how long POST /v1/admin/pause waits for the
// mutations admitted before the pause to finish.
const PauseDrainTimeout = 10 * time.Second

// readinessProbeKey is the key the node reads until the store answers, to
// become ready. It is an ordinary user key that lake never writes: a point
// read of it costs one backend read and its absence is an answer.
const readinessProbeKey = "lake-readiness-probe"

// GuardedBodyLimit is the largest body POST /v1/guarded-mutate accepts:
// three maximal values in base64 (guard, expected, new) and two maximal keys
// with every byte JSON-escaped, plus room for the structure.
const GuardedBodyLimit = 3*4*((metastore.MaxValueBytes+2)/3) + 2*6*metastore.MaxKeyBytes + 4096

// smallBodyLimit bounds the bodies of the admin endpoints.
const smallBodyLimit = 64 << 10

// Options configure New. The zero value is usable: no token, a fresh
// Admission, the tbl/ catalog refreshed every 5 s, a fresh registry and
// slog.Default.
type Options struct {
	// Token, when set, is the bearer token every /v1/ request must carry.
	// It must be visible ASCII without spaces (it travels in a header).
	Token string
	// NodeID identifies the node in logs and the lake_node_info metric.
	NodeID string
	// Admission decides whether mutations are admitted. Pass one to pause
	// the node from outside (a migration); nil makes a fresh one.
	Admission *Admission
	// CatalogPrefix is the prefix the catalog cache holds; empty means
	// DefaultCatalogPrefix.
	CatalogPrefix string
	// CatalogInterval is the time between catalog refreshes; zero means
	// DefaultCatalogInterval.
	CatalogInterval time.Duration
	// CatalogPageSize is the page limit of the catalog's List calls; zero
	// means metastore.DefaultPageSize.
	CatalogPageSize int
	// CatalogMaxBytes bounds the keys and values the catalog copy may
	// hold; a refresh that finds more fails and keeps the last good copy.
	// Zero means DefaultCatalogMaxBytes.
	CatalogMaxBytes int64
	// BodyTimeout bounds how long a request body may take to arrive; a
	// body still incomplete then is answered 408. Zero means
	// DefaultBodyTimeout.
	BodyTimeout time.Duration
	// CatalogTimeout bounds one refresh; zero means DefaultCatalogTimeout.
	CatalogTimeout time.Duration
	// RetryAfter is the advice sent with writes_paused and unavailable;
	// zero means DefaultRetryAfter. It is rounded up to whole seconds.
	RetryAfter time.Duration
	// Logger receives one debug line per request and warnings and errors;
	// nil means slog.Default().
	Logger *slog.Logger
	// PauseSources are added to the admission: each pauses writes while it
	// says so (a migration's finalization, wired by the caller).
	PauseSources []PauseSource
	// Collectors are registered with the node's metrics (a backend's cost
	// counters, a migration's state: see package migrate/nodewatch),
	// beside lake's own.
	Collectors []prometheus.Collector
	// Data, when set, is the datastore the node serves beside the
	// key-value API, with its locks (nodeapi.DataPrefix); nil serves none.
	Data *datastore.Store
	// MaxPendingConns bounds the connections that have not yet carried an
	// authorized request; more are answered 503 and closed. Zero means
	// DefaultMaxPendingConns.
	MaxPendingConns int
	// Registry receives the node's metrics and is what /metrics serves;
	// nil means a fresh registry with the Go and process collectors. It
	// must not hold another Server's metrics (New fails).
	Registry *prometheus.Registry
}

// Server is the node's http.Handler. Make one with New, serve it with an
// http.Server, and run Run in a goroutine for readiness and the catalog.
type Server struct {
	store       *metastore.Store
	data        *datastore.Store
	dataNS      nsCache
	tokenSum    [32]byte
	hasToken    bool
	nodeID      string
	admission   *Admission
	catalog     *catalog
	interval    time.Duration
	timeout     time.Duration
	retryAfter  string
	bodyTimeout time.Duration
	log         *slog.Logger
	metrics     *metrics
	promH       http.Handler
	ready       atomic.Bool
	pending     pendingConns
	running     atomic.Bool
}

var _ http.Handler = (*Server)(nil)

// New returns a Server over store. It refuses contradictory or invalid
// options; opts may be nil. New does no I/O: the node becomes ready when
// Run (or a request) gets an answer from the store.
func New(store *metastore.Store, opts *Options) (*Server, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: server: nil store", metastore.ErrInvalidArgument)
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if err := validateToken(o.Token); err != nil {
		return nil, err
	}
	if o.CatalogPrefix == "" {
		o.CatalogPrefix = DefaultCatalogPrefix
	}
	if err := metastore.ValidatePrefix(o.CatalogPrefix); err != nil {
		return nil, fmt.Errorf("lake: catalog prefix: %w", err)
	}
	switch {
	case o.CatalogInterval < 0, o.CatalogTimeout < 0, o.RetryAfter < 0, o.BodyTimeout < 0, o.CatalogMaxBytes < 0:
		return nil, fmt.Errorf("%w: server: negative duration", metastore.ErrInvalidArgument)
	case o.CatalogPageSize < 0 || o.CatalogPageSize > metastore.MaxListLimit:
		return nil, fmt.Errorf("%w: catalog page size %d is outside 1..%d", metastore.ErrInvalidArgument, o.CatalogPageSize, metastore.MaxListLimit)
	}
	if o.CatalogInterval == 0 {
		o.CatalogInterval = DefaultCatalogInterval
	}
	if o.CatalogMaxBytes == 0 {
		o.CatalogMaxBytes = DefaultCatalogMaxBytes
	}
	if o.BodyTimeout == 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.CatalogTimeout == 0 {
		o.CatalogTimeout = DefaultCatalogTimeout
	}
	if o.CatalogPageSize == 0 {
		o.CatalogPageSize = metastore.DefaultPageSize
	}
	if o.MaxPendingConns <= 0 {
		o.MaxPendingConns = DefaultMaxPendingConns
	}
	if o.RetryAfter == 0 {
		o.RetryAfter = DefaultRetryAfter
	}
	if o.Admission == nil {
		o.Admission = NewAdmission()
	}
	for _, src := range o.PauseSources {
		o.Admission.AddSource(src)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registry == nil {
		o.Registry = newRegistry()
	}
	s := &Server{
		store:       store,
		data:        o.Data,
		hasToken:    o.Token != "",
		tokenSum:    sha256.Sum256([]byte(o.Token)),
		nodeID:      o.NodeID,
		admission:   o.Admission,
		catalog:     &catalog{store: store, prefix: o.CatalogPrefix, pageSize: o.CatalogPageSize, maxBytes: o.CatalogMaxBytes},
		bodyTimeout: o.BodyTimeout,
		interval:    o.CatalogInterval,
		timeout:     o.CatalogTimeout,
		retryAfter:  strconv.Itoa(int((o.RetryAfter + time.Second - 1) / time.Second)),
		log:         o.Logger,
		promH:       promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{}),
	}
	s.pending.max = int64(o.MaxPendingConns)
	m, err := newMetrics(o.Registry, s, o.Collectors)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	return s, nil
}

// Admission returns the node's write admission, to pause it from outside.
func (s *Server) Admission() *Admission { return s.admission }

// Ready reports whether the store has answered a read (what /readyz says).
func (s *Server) Ready() bool { return s.ready.Load() }

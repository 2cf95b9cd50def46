package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/server/nodeapi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Defaults of Options.
const (
	DefaultCatalogPrefix   = "tbl/"
	DefaultCatalogInterval = 5 * time.Second
	DefaultCatalogTimeout  = 30 * time.Second
	DefaultRetryAfter      = time.Second
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
	// CatalogTimeout bounds one refresh; zero means DefaultCatalogTimeout.
	CatalogTimeout time.Duration
	// RetryAfter is the advice sent with writes_paused and unavailable;
	// zero means DefaultRetryAfter. It is rounded up to whole seconds.
	RetryAfter time.Duration
	// Logger receives one debug line per request and warnings and errors;
	// nil means slog.Default().
	Logger *slog.Logger
	// Collectors are extra metrics the node exports beside its own (a
	// store's cost counters, a migration's state: see package
	// migrate/nodewatch). A pause source, such as a migration, is added to
	// Admission by the caller.
	Collectors []prometheus.Collector
	// Registry receives the node's metrics and is what /metrics serves;
	// nil means a fresh registry with the Go and process collectors. It
	// must not hold another Server's metrics (New fails).
	Registry *prometheus.Registry
}

// Server is the node's http.Handler. Make one with New, serve it with an
// http.Server, and run Run in a goroutine for readiness and the catalog.
type Server struct {
	store      *metastore.Store
	tokenSum   [32]byte
	hasToken   bool
	nodeID     string
	admission  *Admission
	collectors []prometheus.Collector
	catalog    *catalog
	interval   time.Duration
	timeout    time.Duration
	retryAfter string
	log        *slog.Logger
	metrics    *metrics
	promH      http.Handler
	ready      atomic.Bool
	running    atomic.Bool
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
	case o.CatalogInterval < 0, o.CatalogTimeout < 0, o.RetryAfter < 0:
		return nil, fmt.Errorf("%w: server: negative duration", metastore.ErrInvalidArgument)
	case o.CatalogPageSize < 0 || o.CatalogPageSize > metastore.MaxListLimit:
		return nil, fmt.Errorf("%w: catalog page size %d is outside 1..%d", metastore.ErrInvalidArgument, o.CatalogPageSize, metastore.MaxListLimit)
	}
	if o.CatalogInterval == 0 {
		o.CatalogInterval = DefaultCatalogInterval
	}
	if o.CatalogTimeout == 0 {
		o.CatalogTimeout = DefaultCatalogTimeout
	}
	if o.CatalogPageSize == 0 {
		o.CatalogPageSize = metastore.DefaultPageSize
	}
	if o.RetryAfter == 0 {
		o.RetryAfter = DefaultRetryAfter
	}
	if o.Admission == nil {
		o.Admission = NewAdmission()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registry == nil {
		o.Registry = newRegistry()
	}
	s := &Server{
		store:      store,
		hasToken:   o.Token != "",
		tokenSum:   sha256.Sum256([]byte(o.Token)),
		nodeID:     o.NodeID,
		admission:  o.Admission,
		collectors: o.Collectors,
		catalog:    &catalog{store: store, prefix: o.CatalogPrefix, pageSize: o.CatalogPageSize},
		interval:   o.CatalogInterval,
		timeout:    o.CatalogTimeout,
		retryAfter: strconv.Itoa(int((o.RetryAfter + time.Second - 1) / time.Second)),
		log:        o.Logger,
		promH:      promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{}),
	}
	m, err := newMetrics(o.Registry, s)
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

// request is one request in flight: what the handler decided, for the
// request log line and the metrics.
type request struct {
	w       http.ResponseWriter
	r       *http.Request
	op      string
	outcome string
	status  int
}

// ServeHTTP routes one request. Keys are taken from the escaped path by
// hand, not through http.ServeMux, which cleans paths (collapsing "//" and
// resolving "." and "..") and would redirect a request for one key to
// another key.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rq := &request{w: w, r: r, op: "unknown"}
	s.route(rq)
	took := time.Since(start)
	s.metrics.observe(rq.op, rq.outcome, took)
	s.log.Debug("request", "method", r.Method, "path", r.URL.EscapedPath(), "op", rq.op,
		"status", rq.status, "outcome", rq.outcome, "duration", took, "remote", r.RemoteAddr)
}

func (s *Server) route(rq *request) {
	path := rq.r.URL.EscapedPath()
	if strings.HasPrefix(path, "/v1/") && !s.authorized(rq.r) {
		rq.w.Header().Set("WWW-Authenticate", `Bearer realm="lake"`)
		s.fail(rq, httpErr(http.StatusUnauthorized, nodeapi.CodeUnauthorized, "lake: unauthorized: this node needs Authorization: Bearer TOKEN (LAKE_TOKEN or LAKE_TOKEN_FILE on the client)"))
		return
	}
	method := rq.r.Method
	switch {
	case strings.HasPrefix(path, nodeapi.KVPrefix):
		switch method {
		case http.MethodGet, http.MethodHead:
			rq.op = "get"
			s.handleGet(rq, path)
		case http.MethodPut:
			rq.op = "put"
			s.handlePut(rq, path)
		case http.MethodDelete:
			rq.op = "delete"
			s.handleDelete(rq, path)
		default:
			s.methodNotAllowed(rq, "GET, HEAD, PUT, DELETE")
		}
	case endpoints[path].handle != nil:
		ep := endpoints[path]
		rq.op = ep.op
		if s.allow(rq, ep.method) {
			ep.handle(s, rq)
		}
	default:
		s.fail(rq, httpErr(http.StatusNotFound, nodeapi.CodeInvalidArgument, "lake: invalid argument: no endpoint "+path+" (see the README, section HTTP API)"))
	}
}

// endpoint is a fixed path of the API other than /v1/kv/.
type endpoint struct {
	op     string // the op label of metrics and logs
	method string
	handle func(*Server, *request)
}

// endpoints maps each fixed path to its endpoint.
var endpoints = map[string]endpoint{
	nodeapi.GuardedPath: {"guarded_mutate", http.MethodPost, (*Server).handleGuarded},
	nodeapi.ListPath:    {"list", http.MethodGet, (*Server).handleList},
	nodeapi.CatalogPath: {"catalog", http.MethodGet, (*Server).handleCatalog},
	nodeapi.PausePath:   {"pause", http.MethodPost, (*Server).handlePause},
	nodeapi.ResumePath:  {"resume", http.MethodPost, (*Server).handleResume},
	nodeapi.HealthPath:  {"healthz", http.MethodGet, func(s *Server, rq *request) { s.text(rq, http.StatusOK, "ok\n") }},
	nodeapi.ReadyPath:   {"readyz", http.MethodGet, (*Server).handleReady},
	nodeapi.MetricsPath: {"metrics", http.MethodGet, func(s *Server, rq *request) {
		rq.status, rq.outcome = http.StatusOK, "ok"
		s.promH.ServeHTTP(rq.w, rq.r)
	}},
}

// allow admits method (and HEAD for GET) or answers 405.
func (s *Server) allow(rq *request, method string) bool {
	m := rq.r.Method
	if m == method || (method == http.MethodGet && m == http.MethodHead) {
		return true
	}
	allowed := method
	if method == http.MethodGet {
		allowed = "GET, HEAD"
	}
	s.methodNotAllowed(rq, allowed)
	return false
}

func (s *Server) methodNotAllowed(rq *request, allowed string) {
	rq.w.Header().Set("Allow", allowed)
	s.fail(rq, httpErr(http.StatusMethodNotAllowed, nodeapi.CodeInvalidArgument,
		fmt.Sprintf("lake: invalid argument: method %s is not allowed here (allowed: %s)", rq.r.Method, allowed)))
}

// authorized reports whether r carries the node's token (always true on a
// node without one). The comparison is of SHA-256 sums in constant time, so
// neither the token's bytes nor its length leak through timing.
func (s *Server) authorized(r *http.Request) bool {
	if !s.hasToken {
		return true
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) == 1
}

// keyOf returns the key of a /v1/kv/ path.
func keyOf(rq *request, path string) (string, error) {
	if rq.r.URL.RawQuery != "" || rq.r.URL.ForceQuery {
		return "", fmt.Errorf("%w: the key path has a query string; a \"?\" in a key must be escaped as %%3F", metastore.ErrInvalidKey)
	}
	return nodeapi.UnescapeKey(strings.TrimPrefix(path, nodeapi.KVPrefix))
}

func (s *Server) handleGet(rq *request, path string) {
	key, err := keyOf(rq, path)
	if err != nil {
		s.fail(rq, err)
		return
	}
	v, err := s.store.Get(rq.r.Context(), key)
	if err == nil || errors.Is(err, metastore.ErrNotFound) {
		s.markReady()
	}
	if err != nil {
		s.fail(rq, err)
		return
	}
	etag := nodeapi.ETag(v)
	h := rq.w.Header()
	h.Set("ETag", etag)
	// Reads are strongly consistent: a cache may keep the value only if it
	// revalidates it (If-None-Match) every time.
	h.Set("Cache-Control", "no-cache")
	if inm := rq.r.Header.Get("If-None-Match"); inm != "" && etagListMatches(inm, etag, true) {
		rq.status, rq.outcome = http.StatusNotModified, "not_modified"
		rq.w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", nodeapi.ValueMIMEType)
	h.Set("Content-Length", strconv.Itoa(len(v)))
	rq.status, rq.outcome = http.StatusOK, "ok"
	rq.w.WriteHeader(http.StatusOK)
	rq.w.Write(v)
}

// conditionalErr marks an error of a conditional request (If-Match,
// If-None-Match), whose conflicts are answered 412 rather than 409.
type conditionalErr struct{ error }

func (e conditionalErr) Unwrap() error { return e.error }

func (s *Server) handlePut(rq *request, path string) {
	key, err := keyOf(rq, path)
	if err != nil {
		s.fail(rq, err)
		return
	}
	ifMatch := strings.Join(rq.r.Header.Values("If-Match"), ",")
	ifNoneMatch := strings.TrimSpace(strings.Join(rq.r.Header.Values("If-None-Match"), ","))
	switch {
	case ifMatch != "" && ifNoneMatch != "":
		s.fail(rq, fmt.Errorf("%w: give If-Match or If-None-Match, not both", metastore.ErrInvalidArgument))
		return
	case ifNoneMatch != "" && ifNoneMatch != "*":
		s.fail(rq, fmt.Errorf("%w: on PUT, If-None-Match supports only * (create if absent)", metastore.ErrInvalidArgument))
		return
	case ifNoneMatch != "":
		rq.op = "create"
	case ifMatch != "":
		rq.op = "cas"
	}
	// Refuse early, before reading up to 350 KiB that would be thrown away.
	if err := s.admission.Check(); err != nil {
		s.fail(rq, err)
		return
	}
	value, err := readBody(rq, metastore.MaxValueBytes)
	if err != nil {
		s.fail(rq, err)
		return
	}
	release, err := s.admission.Admit()
	if err != nil {
		s.fail(rq, err)
		return
	}
	defer release()
	ctx := rq.r.Context()
	switch rq.op {
	case "create":
		err = s.store.CAS(ctx, key, metastore.ExpectAbsent(), value)
	case "cas":
		var cur []byte
		cur, err = s.current(ctx, key, ifMatch)
		if err == nil {
			err = s.store.CAS(ctx, key, metastore.ExpectValue(cur), value)
		}
	default:
		err = s.store.Put(ctx, key, value)
	}
	if err != nil {
		if rq.op != "put" {
			err = conditionalErr{err}
		}
		s.fail(rq, err)
		return
	}
	rq.w.Header().Set("ETag", nodeapi.ETag(value))
	s.noContent(rq)
}

// current reads key and checks it against an If-Match list. It returns the
// exact bytes read, which the caller uses as the expected value of its
// conditional write: the store then compares bytes, so a change after this
// read is a conflict, not a lost update.
func (s *Server) current(ctx context.Context, key, ifMatch string) ([]byte, error) {
	cur, err := s.store.Get(ctx, key)
	if errors.Is(err, metastore.ErrNotFound) {
		return nil, metastore.Conflict(key, "If-Match: the key is absent")
	}
	if err != nil {
		return nil, err
	}
	if !etagListMatches(ifMatch, nodeapi.ETag(cur), false) {
		return nil, metastore.Conflict(key, "current value does not match If-Match")
	}
	return cur, nil
}

func (s *Server) handleDelete(rq *request, path string) {
	key, err := keyOf(rq, path)
	if err != nil {
		s.fail(rq, err)
		return
	}
	ifMatch := strings.Join(rq.r.Header.Values("If-Match"), ",")
	switch {
	case rq.r.Header.Get("If-None-Match") != "":
		s.fail(rq, fmt.Errorf("%w: DELETE takes If-Match, not If-None-Match", metastore.ErrInvalidArgument))
		return
	case ifMatch == "":
		s.fail(rq, httpErr(http.StatusPreconditionRequired, nodeapi.CodeInvalidArgument,
			"lake: invalid argument: DELETE needs If-Match: ETAG (the ETag of the value to delete, or *)"))
		return
	}
	release, err := s.admission.Admit()
	if err != nil {
		s.fail(rq, err)
		return
	}
	defer release()
	ctx := rq.r.Context()
	cur, err := s.current(ctx, key, ifMatch)
	if err == nil {
		err = s.store.Delete(ctx, key, cur)
	}
	if err != nil {
		s.fail(rq, conditionalErr{err})
		return
	}
	s.noContent(rq)
}

func (s *Server) handleGuarded(rq *request) {
	if err := s.admission.Check(); err != nil {
		s.fail(rq, err)
		return
	}
	body, err := readBody(rq, GuardedBodyLimit)
	if err != nil {
		s.fail(rq, err)
		return
	}
	var req nodeapi.GuardedRequest
	if err := decodeJSON(body, &req); err != nil {
		s.fail(rq, err)
		return
	}
	guard, target, err := guardedArgs(req)
	if err != nil {
		s.fail(rq, err)
		return
	}
	release, err := s.admission.Admit()
	if err != nil {
		s.fail(rq, err)
		return
	}
	defer release()
	if err := s.store.GuardedMutate(rq.r.Context(), guard, target); err != nil {
		s.fail(rq, err)
		return
	}
	s.noContent(rq)
}

// guardedArgs turns the JSON request into the store's arguments, refusing
// shapes that are ambiguous on the wire (the store refuses the rest).
func guardedArgs(req nodeapi.GuardedRequest) (metastore.Guard, metastore.Mutation, error) {
	var g metastore.Guard
	var m metastore.Mutation
	bad := func(format string, args ...any) (metastore.Guard, metastore.Mutation, error) {
		return g, m, fmt.Errorf("%w: guarded-mutate: "+format, append([]any{metastore.ErrInvalidArgument}, args...)...)
	}
	if req.Guard.Value == nil {
		return bad("guard.value is required (base64; \"\" for an empty value)")
	}
	gv, err := decodeB64(*req.Guard.Value)
	if err != nil {
		return bad("guard.value: %v", err)
	}
	g = metastore.Guard{Key: req.Guard.Key, Value: gv}
	t := req.Target
	m = metastore.Mutation{Key: t.Key, Delete: t.Delete}
	switch {
	case t.ExpectAbsent && t.Expect != nil:
		return bad("give target.expect or target.expect_absent, not both")
	case t.ExpectAbsent:
		m.Expect = metastore.ExpectAbsent()
	case t.Expect != nil:
		ev, err := decodeB64(*t.Expect)
		if err != nil {
			return bad("target.expect: %v", err)
		}
		m.Expect = metastore.ExpectValue(ev)
	default:
		return bad("target needs expect (base64) or expect_absent: true")
	}
	switch {
	case t.Delete && t.Value != nil:
		return bad("a delete takes no target.value")
	case !t.Delete && t.Value == nil:
		return bad("target.value is required unless target.delete is true")
	case !t.Delete:
		v, err := decodeB64(*t.Value)
		if err != nil {
			return bad("target.value: %v", err)
		}
		m.Value = v
	}
	return g, m, nil
}

func decodeB64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, errors.New("not standard padded base64")
	}
	return b, nil
}

// decodeJSON decodes exactly one JSON value with no unknown fields, so a
// misspelled field is an error rather than a silently different request.
func decodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: JSON body: %v", metastore.ErrInvalidArgument, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: JSON body: trailing data after the object", metastore.ErrInvalidArgument)
	}
	return nil
}

func (s *Server) handleList(rq *request) {
	q := rq.r.URL.Query()
	for k, v := range q {
		if k != "prefix" && k != "limit" && k != "cursor" {
			s.fail(rq, fmt.Errorf("%w: unknown list parameter %q (known: prefix, limit, cursor)", metastore.ErrInvalidArgument, k))
			return
		}
		if len(v) != 1 {
			s.fail(rq, fmt.Errorf("%w: list parameter %q given %d times", metastore.ErrInvalidArgument, k, len(v)))
			return
		}
	}
	limit := metastore.DefaultPageSize
	if l := q.Get("limit"); l != "" || q.Has("limit") {
		n, err := strconv.Atoi(l)
		if err != nil {
			s.fail(rq, fmt.Errorf("%w: limit %q is not a number", metastore.ErrInvalidArgument, l))
			return
		}
		limit = n
	}
	page, err := s.store.List(rq.r.Context(), q.Get("prefix"), limit, q.Get("cursor"))
	if err != nil {
		s.fail(rq, err)
		return
	}
	s.markReady()
	s.json(rq, http.StatusOK, nodeapi.ListResponse{Items: wireItems(page.Items), Cursor: page.Cursor})
}

func wireItems(items []metastore.Item) []nodeapi.Item {
	out := make([]nodeapi.Item, len(items))
	for i, it := range items {
		v := it.Value
		if v == nil {
			v = []byte{} // "" in JSON, not null: an empty value is a value
		}
		out[i] = nodeapi.Item{Key: it.Key, Value: v}
	}
	return out
}

func (s *Server) handleCatalog(rq *request) {
	snap := s.catalog.snapshot()
	if !snap.loaded {
		msg := "lake: backend unavailable: the catalog has not been loaded yet"
		if snap.lastErr != nil {
			msg += ": " + snap.lastErr.Error()
		}
		s.fail(rq, httpErr(http.StatusServiceUnavailable, nodeapi.CodeUnavailable, msg))
		return
	}
	resp := nodeapi.CatalogResponse{
		Prefix:      s.catalog.prefix,
		Items:       wireItems(snap.items),
		Size:        len(snap.items),
		RefreshedAt: snap.refreshedAt.UTC().Format(time.RFC3339Nano),
		AgeSeconds:  time.Since(snap.refreshedAt).Seconds(),
	}
	if snap.lastErr != nil {
		resp.LastError = snap.lastErr.Error()
		resp.LastErrorAt = snap.lastErrAt.UTC().Format(time.RFC3339Nano)
	}
	s.json(rq, http.StatusOK, resp)
}

func (s *Server) handlePause(rq *request) {
	body, err := readBody(rq, smallBodyLimit)
	if err != nil {
		s.fail(rq, err)
		return
	}
	var req nodeapi.PauseRequest
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeJSON(body, &req); err != nil {
			s.fail(rq, err)
			return
		}
	}
	s.admission.Pause(req.Reason)
	ctx, cancel := context.WithTimeout(rq.r.Context(), PauseDrainTimeout)
	defer cancel()
	drainErr := s.admission.WaitIdle(ctx)
	paused, reason := s.admission.State()
	s.log.Warn("write admission paused", "reason", reason, "drained", drainErr == nil, "remote", rq.r.RemoteAddr)
	s.json(rq, http.StatusOK, nodeapi.AdmissionResponse{Paused: paused, Reason: reason, Drained: drainErr == nil})
}

func (s *Server) handleResume(rq *request) {
	s.admission.Resume()
	paused, reason := s.admission.State()
	s.log.Warn("write admission resumed by an operator", "still_paused", paused, "reason", reason, "remote", rq.r.RemoteAddr)
	s.json(rq, http.StatusOK, nodeapi.AdmissionResponse{Paused: paused, Reason: reason})
}

func (s *Server) handleReady(rq *request) {
	if !s.ready.Load() {
		s.fail(rq, httpErr(http.StatusServiceUnavailable, nodeapi.CodeUnavailable, "lake: backend unavailable: the store has not answered a read yet"))
		return
	}
	s.text(rq, http.StatusOK, "ready\n")
}

// readBody reads the whole request body, refusing one over limit before
// reading it when its length is declared, and as soon as it passes the limit
// otherwise (http.MaxBytesReader, which also stops the connection from
// being reused for the rest of an oversized body).
func readBody(rq *request, limit int64) ([]byte, error) {
	tooLarge := func() error {
		return httpErr(http.StatusRequestEntityTooLarge, nodeapi.CodeTooLarge,
			fmt.Sprintf("lake: invalid value: the body is larger than %d bytes", limit))
	}
	if rq.r.ContentLength > limit {
		return nil, tooLarge()
	}
	b, err := io.ReadAll(http.MaxBytesReader(rq.w, rq.r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge()
	case err != nil:
		return nil, fmt.Errorf("%w: reading the request body: %v", metastore.ErrInvalidArgument, err)
	}
	return b, nil
}

// httpError is an error the HTTP layer itself decides (no route, method,
// auth, size limits), with its own status and code.
type httpError struct {
	status int
	code   string
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func httpErr(status int, code, msg string) error { return &httpError{status, code, msg} }

// statusOf returns the HTTP status of an error code.
func statusOf(code string, conditional bool) int {
	switch code {
	case nodeapi.CodeNotFound:
		return http.StatusNotFound
	case nodeapi.CodeConflict:
		if conditional {
			return http.StatusPreconditionFailed
		}
		return http.StatusConflict
	case nodeapi.CodeRefused:
		return http.StatusConflict
	case nodeapi.CodeWritesPaused, nodeapi.CodeUnavailable:
		return http.StatusServiceUnavailable
	case nodeapi.CodeUnauthorized:
		return http.StatusUnauthorized
	case nodeapi.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case nodeapi.CodeInternal:
		return http.StatusInternalServerError
	default:
		return http.StatusBadRequest
	}
}

// fail answers err as a JSON nodeapi.Error.
func (s *Server) fail(rq *request, err error) {
	body := nodeapi.Error{Message: err.Error()}
	var he *httpError
	var status int
	if errors.As(err, &he) {
		body.Code, status = he.code, he.status
	} else {
		var ce conditionalErr
		body.Code = nodeapi.CodeOf(err)
		status = statusOf(body.Code, errors.As(err, &ce))
	}
	if !strings.HasPrefix(body.Message, "lake: ") {
		body.Message = "lake: " + body.Message
	}
	var conflict *metastore.ConflictError
	if errors.As(err, &conflict) {
		body.Key, body.Reason = conflict.Key, conflict.Reason
	}
	// A client that went away is not the node's problem: its request line
	// at debug is enough.
	gone := rq.r.Context().Err() != nil
	switch body.Code {
	case nodeapi.CodeWritesPaused, nodeapi.CodeUnavailable:
		rq.w.Header().Set("Retry-After", s.retryAfter)
		if !gone {
			s.log.Warn("request refused", "op", rq.op, "code", body.Code, "err", err)
		}
	case nodeapi.CodeInternal:
		if !gone {
			s.log.Error("request failed", "op", rq.op, "path", rq.r.URL.EscapedPath(), "err", err)
		}
	}
	rq.outcome = body.Code
	s.json(rq, status, body)
}

func (s *Server) json(rq *request, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a bug can get here (every body is a plain struct).
		s.log.Error("encoding a response", "err", err)
		status, b = http.StatusInternalServerError, []byte(`{"code":"internal","message":"lake: encoding the response failed"}`)
	}
	b = append(b, '\n')
	h := rq.w.Header()
	h.Set("Content-Type", nodeapi.JSONMIMEType)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	rq.status = status
	if rq.outcome == "" {
		rq.outcome = "ok"
	}
	rq.w.WriteHeader(status)
	rq.w.Write(b)
}

func (s *Server) text(rq *request, status int, msg string) {
	rq.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rq.status, rq.outcome = status, "ok"
	rq.w.WriteHeader(status)
	io.WriteString(rq.w, msg)
}

func (s *Server) noContent(rq *request) {
	rq.status, rq.outcome = http.StatusNoContent, "ok"
	rq.w.WriteHeader(http.StatusNoContent)
}

// etagListMatches reports whether an If-Match or If-None-Match header value
// (a comma-separated list of entity tags, or *) matches etag. If-Match uses
// the strong comparison (a weak tag W/"..." never matches); If-None-Match
// the weak one (RFC 9110, 13.1).
func etagListMatches(header, etag string, weak bool) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" {
			return true
		}
		if w, ok := strings.CutPrefix(t, "W/"); ok {
			if !weak {
				continue
			}
			t = w
		}
		if t == etag {
			return true
		}
	}
	return false
}

// validateToken refuses a token that cannot travel in a header as is.
func validateToken(tok string) error {
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("%w: the token must be visible ASCII without spaces (byte %d is 0x%02x)", metastore.ErrInvalidArgument, i, c)
		}
	}
	return nil
}

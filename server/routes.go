package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lakemeta/lake/nodeapi"
)

// request is one request in flight: what the handler decided, for the
// request log line and the metrics.
type request struct {
	w       http.ResponseWriter
	r       *http.Request
	op      string
	outcome string
	status  int
	// bodyTimeout bounds the arrival of the request's body.
	bodyTimeout time.Duration
	// query is the parsed query string of a fixed /v1/ endpoint.
	query url.Values
}

// ServeHTTP routes one request. Keys are taken from the escaped path by
// hand, not through http.ServeMux, which cleans paths (collapsing "//" and
// resolving "." and "..") and would redirect a request for one key to
// another key.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rq := &request{w: w, r: r, op: "unknown", bodyTimeout: s.bodyTimeout}
	s.route(rq)
	// Whatever of the body the handler left unread, net/http reads on
	// (up to 256 KiB) to reuse the connection: bound that too, since the
	// server has no ReadTimeout.
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyTimeout))
	took := time.Since(start)
	s.metrics.observe(rq.op, rq.outcome, took)
	s.log.Debug("request", "method", r.Method, "path", r.URL.EscapedPath(), "op", rq.op,
		"status", rq.status, "outcome", rq.outcome, "duration", took, "remote", r.RemoteAddr)
}

func (s *Server) route(rq *request) {
	path := rq.r.URL.EscapedPath()
	if err := checkEdges(rq.r, path); err != nil {
		s.fail(rq, err)
		return
	}
	if strings.HasPrefix(path, nodeapi.APIPrefix) && !s.authorized(rq.r) {
		rq.w.Header().Set("WWW-Authenticate", nodeapi.BearerScheme+` realm="lake"`)
		s.fail(rq, httpErr(http.StatusUnauthorized, nodeapi.CodeUnauthorized, "lake: unauthorized: this node needs Authorization: Bearer TOKEN (LAKE_TOKEN or LAKE_TOKEN_FILE on the client)"))
		return
	}
	if s.authorized(rq.r) {
		markAuthenticated(rq.r)
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
	case strings.HasPrefix(path, nodeapi.DataPrefix):
		s.handleData(rq, path)
	case endpoints[path].handle != nil:
		ep := endpoints[path]
		rq.op = ep.op
		if !s.allow(rq, ep.method) {
			return
		}
		if strings.HasPrefix(path, nodeapi.APIPrefix) {
			// Every /v1/ endpoint names the parameters it takes and refuses
			// the rest rather than ignore them.
			q, err := query(rq, ep.params...)
			if err != nil {
				s.fail(rq, err)
				return
			}
			rq.query = q
		}
		ep.handle(s, rq)
	default:
		s.fail(rq, httpErr(http.StatusNotFound, nodeapi.CodeInvalidArgument, "lake: invalid argument: no endpoint "+path+" (see docs/node.md, section HTTP API)"))
	}
}

// endpoint is a fixed path of the API other than /v1/kv/.
type endpoint struct {
	op     string // the op label of metrics and logs
	method string
	handle func(*Server, *request)
	params []string // the query parameters it takes (/v1/ endpoints)
}

// endpoints maps each fixed path to its endpoint.
var endpoints = map[string]endpoint{
	nodeapi.GuardedPath: {"guarded_mutate", http.MethodPost, (*Server).handleGuarded, nil},
	nodeapi.ListPath:    {"list", http.MethodGet, (*Server).handleList, []string{nodeapi.ListPrefixParam, nodeapi.ListLimitParam, nodeapi.ListCursorParam}},
	nodeapi.CatalogPath: {"catalog", http.MethodGet, (*Server).handleCatalog, []string{nodeapi.CatalogAfterParam, nodeapi.CatalogLimitParam}},
	nodeapi.PausePath:   {"pause", http.MethodPost, (*Server).handlePause, nil},
	nodeapi.ResumePath:  {"resume", http.MethodPost, (*Server).handleResume, nil},
	nodeapi.HealthPath:  {"healthz", http.MethodGet, func(s *Server, rq *request) { s.text(rq, http.StatusOK, "ok\n") }, nil},
	nodeapi.ReadyPath:   {"readyz", http.MethodGet, (*Server).handleReady, nil},
	nodeapi.MetricsPath: {"metrics", http.MethodGet, func(s *Server, rq *request) {
		rq.status, rq.outcome = http.StatusOK, "ok"
		s.promH.ServeHTTP(rq.w, rq.r)
	}, nil},
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

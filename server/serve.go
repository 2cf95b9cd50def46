package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// DefaultShutdownTimeout is how long Serve lets in-flight requests finish
// once its context ends, when ServeConfig does not say.
const DefaultShutdownTimeout = 10 * time.Second

// Timeouts of the node's HTTP server. Headers must arrive quickly; a body
// is bounded by Options.BodyTimeout inside the handler (so that a stalled
// body is answered, not cut); responses are bounded by their largest page.
const (
	readHeaderTimeout = 10 * time.Second
	writeTimeout      = 5 * time.Minute
	idleTimeout       = 2 * time.Minute
)

// ServeConfig configures Serve: how the node speaks and how it stops.
type ServeConfig struct {
	// TLS, when set, makes the node serve HTTPS with it.
	TLS *tls.Config
	// ShutdownTimeout bounds how long in-flight requests may finish after
	// ctx ends; zero means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// OnStop, when set, runs once HTTP has stopped and the catalog
	// refresher has ended, before Serve returns: the place to leave a
	// registry or stop a watcher while the store is still open.
	OnStop func()
}

// Listen opens the node's TCP listener on addr (HOST:PORT). The CLI calls
// it before it opens or creates anything, so that a node that cannot bind
// leaves no file behind.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("lake: listen on %s: %w", addr, err)
	}
	return ln, nil
}

// Serve serves the node on ln until ctx ends or serving fails, and runs
// Run (readiness and the catalog) beside it. Its shutdown order is fixed:
// stop accepting and let in-flight requests finish (at most
// ShutdownTimeout, then cut them off), stop the catalog refresher, run
// OnStop; the caller closes the store after Serve returns. It returns nil
// after a clean shutdown, and an error if serving failed or requests had to
// be cut off. cfg may be nil.
func (s *Server) Serve(ctx context.Context, ln net.Listener, cfg *ServeConfig) error {
	c := ServeConfig{}
	if cfg != nil {
		c = *cfg
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	hs := s.httpServer()
	ln = s.wrapListener(ln, c.TLS)
	runCtx, stopRun := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		s.Run(runCtx)
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	scheme := "http"
	if c.TLS != nil {
		scheme = "https"
	}
	s.log.Info("serving", "url", scheme+"://"+ln.Addr().String(), "node_id", s.nodeID,
		"backend", s.store.Driver().Name(), "auth", s.hasToken, "catalog_prefix", s.catalog.prefix)

	var result error
	select {
	case err := <-serveErr:
		result = fmt.Errorf("lake: serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
		s.log.Info("shutting down: draining in-flight requests", "timeout", c.ShutdownTimeout)
		sctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
		if err := hs.Shutdown(sctx); err != nil {
			hs.Close()
			result = fmt.Errorf("lake: shutdown: in-flight requests did not finish within %v and were cut off", c.ShutdownTimeout)
		}
		cancel()
	}
	// The catalog refresher uses the store: stop it before the caller
	// closes the store.
	stopRun()
	<-runDone
	if c.OnStop != nil {
		c.OnStop()
	}
	if result == nil {
		s.log.Info("stopped")
	}
	return result
}

// httpServer returns the node's http.Server with its timeouts. There is
// no ReadTimeout: it would cut a slow body off mid-read with a bare
// connection error; the handler bounds bodies instead and answers 408.
func (s *Server) httpServer() *http.Server {
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: readHeaderTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnContext:       connContext,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// ServeLoopback serves h on a free loopback port, in the background, for
// in-process nodes (benchmarks, test fleets). It returns the node's base URL
// and the server, which the caller shuts down.
func ServeLoopback(h http.Handler) (string, *http.Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout}
	if s, ok := h.(*Server); ok {
		hs, ln = s.httpServer(), s.wrapListener(ln, nil)
	}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ln.Close()
		}
	}()
	return "http://" + ln.Addr().String(), hs, nil
}

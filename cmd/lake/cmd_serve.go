package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/lakemeta/lake/internal/lakeerr"
	"github.com/lakemeta/lake/server"
	"github.com/lakemeta/lake/storeurl"
	"github.com/spf13/cobra"
)

type serveOptions struct {
	listen          string
	nodeID          string
	tokenFile       string
	tlsCert         string
	tlsKey          string
	catalogPrefix   string
	catalogInterval time.Duration
	catalogMaxBytes int64
	logLevel        string
	logFormat       string
	shutdownTimeout time.Duration
	role            string
}

func newServeCommand(g *globalOptions) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a metadata node: the store's whole contract over HTTP",
		Long: `Run a long-lived metadata node that serves the store named by --store over HTTP
(the API is described in docs/node.md). Other processes then use the store
through the node with --store http://HOST:PORT, which is how several processes
share one bolt file: the node holds the file, and a CLI pointed at the file
itself fails fast with "locked by another process".

Endpoints: /v1/kv/KEY (GET, PUT, DELETE; conditional with If-Match and
If-None-Match: *), /v1/guarded-mutate, /v1/list, /v1/catalog, /v1/admin/pause,
/v1/admin/resume, /healthz, /readyz, /metrics (Prometheus, lake_*).

Authentication: with --token-file (env LAKE_TOKEN_FILE), every /v1/ request
needs "Authorization: Bearer TOKEN"; clients read the token from LAKE_TOKEN or
LAKE_TOKEN_FILE. A token is required when --listen is not a loopback address;
without one the node refuses to start. /healthz, /readyz and /metrics need no
token. With --tls-cert and --tls-key the node serves HTTPS.

Write admission: POST /v1/admin/pause makes every mutation fail with 503
writes_paused (exit code 5 on the CLI) until POST /v1/admin/resume; reads go on.

Catalog cache: the node reads --catalog-prefix through paged List every
--catalog-interval and serves it from memory at /v1/catalog; when a refresh
fails it keeps serving the last good copy and reports its age and the error.
The copy holds at most --catalog-max-bytes (32 MiB) of keys and values: a
refresh that finds more fails, so memory stays bounded.

Memory: a list page holds at most 1 MiB of keys and values (or one item), and
list and catalog responses are streamed, never built whole.

Node id: --node-id, else one kept in PATH.node-id beside a bolt file (created
on first start), else derived from the host name and --listen. It labels the
logs and the lake_node_info metric.

Migration: with a dynamodb:// store the node joins the migration's node
registry (--role, capability dual, the state and epoch it observes, a heartbeat
every refresh interval, leaving it on shutdown; a killed node stops counting as
live when its lease of three intervals, at least 3 s, lapses), pauses write admission while a
finalization holds the write barrier (503 writes_paused) and resumes on its own
once it observes the marker, and exports lake_migration_state,
lake_migration_epoch, lake_v1_only_peers and the backend's cost counters.

Readiness: /readyz answers 200 once the store has answered a read, 503 before.
On SIGINT or SIGTERM the node stops accepting connections, lets in-flight
requests finish (at most --shutdown-timeout), closes the store and exits 0; it
exits 1 if it had to cut requests off or could not start (address in use,
store missing or locked), and 2 on invalid flags.

Logs go to stderr: one line per request at --log-level debug, warnings and
errors at warn and error.`,
		Example: `  lake serve
  lake --store http://127.0.0.1:7070 put tbl/orders '{"location":"s3://lake/orders"}'
  curl -s http://127.0.0.1:7070/v1/kv/tbl/orders
  lake --store bolt:///var/lib/lake.db serve --listen 0.0.0.0:7070 --token-file /etc/lake/token \
      --tls-cert /etc/lake/cert.pem --tls-key /etc/lake/key.pem`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), g, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "127.0.0.1:7070", "address to listen on, HOST:PORT (a non-loopback host needs --token-file)")
	f.StringVar(&o.nodeID, "node-id", "", "node id (default: kept beside a bolt file, else derived from host name and --listen)")
	f.StringVar(&o.tokenFile, "token-file", os.Getenv("LAKE_TOKEN_FILE"), "file holding the bearer token clients must send (env LAKE_TOKEN_FILE)")
	f.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate file: serve HTTPS (with --tls-key)")
	f.StringVar(&o.tlsKey, "tls-key", "", "PEM private key file of --tls-cert")
	f.StringVar(&o.catalogPrefix, "catalog-prefix", server.DefaultCatalogPrefix, "prefix the catalog cache holds and serves at /v1/catalog")
	f.DurationVar(&o.catalogInterval, "catalog-interval", server.DefaultCatalogInterval, "time between catalog refreshes")
	f.Int64Var(&o.catalogMaxBytes, "catalog-max-bytes", server.DefaultCatalogMaxBytes, "limit of the catalog copy (bytes of keys and values); a refresh that finds more fails")
	f.StringVar(&o.logLevel, "log-level", "info", "debug (one line per request), info, warn or error")
	f.StringVar(&o.logFormat, "log-format", "text", "text or json")
	f.StringVar(&o.role, "role", "commit", "role in the migration's node registry: commit (writes metadata) or reader")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight requests may take to finish on SIGINT/SIGTERM")
	return cmd
}

func runServe(ctx context.Context, g *globalOptions, o *serveOptions) error {
	logger, err := o.logger()
	if err != nil {
		return err
	}
	if o.role != "commit" && o.role != "reader" {
		return usagef("--role must be commit or reader, not %q", o.role)
	}
	if o.catalogInterval <= 0 || o.shutdownTimeout <= 0 || o.catalogMaxBytes <= 0 {
		return usagef("--catalog-interval, --catalog-max-bytes and --shutdown-timeout must be positive")
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return usagef("give --tls-cert and --tls-key together")
	}
	token, err := readTokenFile(o.tokenFile, logger)
	if err != nil {
		return err
	}
	if err := server.CheckListen(o.listen, token); err != nil {
		return usageError{err}
	}
	if o.nodeID != "" {
		if err := server.ValidateNodeID(o.nodeID); err != nil {
			return usageError{err}
		}
	}
	var tlsConfig *tls.Config
	if o.tlsCert != "" {
		// Loaded now so that a bad file fails the start, not the first client.
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return usageError{lakeerr.Wrap(err, "TLS certificate")}
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	} else if loop, _ := server.IsLoopback(o.listen); !loop {
		logger.Warn("serving plain HTTP beyond loopback: the token travels in clear text; use --tls-cert and --tls-key")
	}

	// A URL no node can serve (s3://, an unknown scheme) is refused as the
	// usage error it is (exit 2) before the bind, so that a busy port does
	// not hide it behind exit 1. Opening such a URL sends no request.
	if !nodeServable(g.store) {
		st, err := storeurl.Open(ctx, g.store, nil)
		if err != nil {
			return err
		}
		st.Close()
	}
	// Bind first: a node that cannot listen (address in use) must leave
	// nothing behind, neither a new bolt file nor a node id file.
	ln, err := server.Listen(o.listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	// A node on the embedded default needs no setup: it creates its bolt
	// file. DynamoDB tables are created only by `lake init`.
	store, err := storeurl.Open(ctx, g.store, &storeurl.Options{Create: strings.HasPrefix(g.store, "bolt://")})
	if err != nil {
		return err
	}
	// From here on the store is closed on every path: it may hold a file lock.
	defer store.Close()
	nodeID, err := o.resolveNodeID(g.store)
	if err != nil {
		return err
	}
	data, err := serveData(ctx, g.store, store, logger)
	if err != nil {
		return err
	}
	if data != nil {
		defer data.Close()
	}
	opts := &server.Options{
		Data:            data,
		Token:           token,
		NodeID:          nodeID,
		CatalogPrefix:   o.catalogPrefix,
		CatalogInterval: o.catalogInterval,
		CatalogMaxBytes: o.catalogMaxBytes,
		Logger:          logger,
	}
	cfg := &server.ServeConfig{TLS: tlsConfig, ShutdownTimeout: o.shutdownTimeout}
	// On DynamoDB the node joins the migration's node registry and follows
	// the migration: it pauses writes while a finalization holds the barrier
	// and resumes on its own after the marker.
	mig, err := followMigration(ctx, store, nodeID, o.role, logger)
	if err != nil {
		return err
	}
	opts.PauseSources = append(opts.PauseSources, mig.sources...)
	opts.Collectors = append(opts.Collectors, mig.collectors...)
	cfg.OnStop = mig.leave
	srv, err := server.New(store, opts)
	if err != nil {
		if cfg.OnStop != nil {
			cfg.OnStop()
		}
		return err
	}
	logger.Info("store opened", "store", g.store, "backend", store.Driver().Name())
	return srv.Serve(ctx, ln, cfg)
}

func (o *serveOptions) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", o.logLevel)
	}
	hopts := &slog.HandlerOptions{Level: level}
	switch o.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, hopts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, hopts)), nil
	}
	return nil, usagef("--log-format %q: want text or json", o.logFormat)
}

// readTokenFile returns the token in file (whitespace trimmed), or "" when
// no file is given.
func readTokenFile(file string, logger *slog.Logger) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", usageError{lakeerr.Wrap(err, "--token-file")}
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", usagef("--token-file %s is empty", file)
	}
	if st, err := os.Stat(file); err == nil && st.Mode().Perm()&0o077 != 0 {
		logger.Warn("the token file is readable by other users; chmod 600 it", "file", file, "mode", st.Mode().Perm().String())
	}
	return tok, nil
}

// resolveNodeID returns --node-id, or the id kept beside a bolt file, or one
// derived from the host name and the listen address.
func (o *serveOptions) resolveNodeID(storeURL string) (string, error) {
	if o.nodeID != "" {
		return o.nodeID, nil
	}
	if path, ok := strings.CutPrefix(storeURL, "bolt://"); ok {
		id, err := server.LoadOrCreateNodeID(server.NodeIDFile(path))
		if err != nil {
			return "", fmt.Errorf("%w (or give --node-id)", err)
		}
		return id, nil
	}
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("lake: no --node-id and no host name to derive one from: %w", err)
	}
	return server.DeriveNodeID(host, o.listen), nil
}

// nodeServable reports whether a store URL names a store a node can serve
// (bolt, DynamoDB, another node); any other scheme is refused by
// storeurl.Open without touching the network.
func nodeServable(raw string) bool {
	for _, p := range []string{"bolt://", "dynamodb://", "http://", "https://"} {
		if strings.HasPrefix(strings.ToLower(raw), p) {
			return true
		}
	}
	return false
}

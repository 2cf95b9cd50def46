// Package nodeclient is the HTTP client of a lake node (`lake serve`),
// written once for both of the node's drivers: metastore/remotestore (the
// metadata store) and datastore/remotefs (the datastore). It owns what the
// two share: the node's base URL and its checks, the bearer token, sending
// a request, classifying a transport failure, and decoding the node's error
// bodies back to the metastore sentinels. The wire names it sends (paths,
// parameters, headers, codes) are package nodeapi's, which the server uses
// too.
//
// # Errors
//
// The node answers an error as a JSON nodeapi.Error whose code names a
// metastore sentinel (nodeapi.Sentinel): ErrorOf returns an error matching
// it with errors.Is, whose message is the node's, starting with "lake: "
// once. A conflict is a *metastore.ConflictError naming its key and reason,
// so errors.As (and datastore.IsFenceConflict) work on the client as on the
// node. A refused token is ErrUnauthorized. A response that is not a
// node's JSON (a proxy's page) is classified by its status alone: a 5xx or
// 429 is metastore.ErrUnavailable, anything else an error that says the URL
// may be wrong.
//
// A request that fails in transport (connection refused, reset, a timeout)
// is metastore.ErrUnavailable, or the context's error when ctx ended.
//
// # Retries
//
// The client does not retry. After a transport failure the outcome of a
// write is unknown, and what to do about it is the caller's contract, not
// the transport's: the metastore's callers treat ErrUnavailable as
// "outcome unknown", the datastore reads a commit back from its log, the
// lock reads its record back. A retry here would hide that ambiguity from
// the one layer that can resolve it. ctx bounds every request.
//
// # Bodies
//
// Request bodies are sent from memory ([]byte), so that the transport can
// resend one on a fresh connection (http.Request.GetBody). Responses are
// returned unread (Do) for the caller to stream, or decoded as they arrive
// within a bound (Call, ReadLimited): a body larger than the node could
// have sent is an error, never an unbounded read.
package nodeclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

// Environment variables that give the token to TokenFromEnv.
const (
	TokenEnv     = "LAKE_TOKEN"
	TokenFileEnv = "LAKE_TOKEN_FILE"
)

// ErrUnauthorized is returned when the node refused the token (or its
// absence). It is not a metastore sentinel: the store is fine, the client's
// configuration is not.
var ErrUnauthorized = errors.New("lake: unauthorized")

// errorBodyLimit bounds an error body read for its JSON: the node's are a
// few hundred bytes.
const errorBodyLimit = 64 << 10

// Options configure New. The zero value is usable.
type Options struct {
	// Token is the node's bearer token; empty sends none.
	Token string
	// Client makes the requests; nil means a client of the Client's own
	// (keep-alive, up to 64 idle connections to the node), whose idle
	// connections Close releases. A given client is the caller's and is
	// not closed.
	Client *http.Client
}

// Client sends requests to one node. It is safe for concurrent use.
type Client struct {
	base   string // scheme://host[:port][/path], without a trailing "/"
	auth   string // "Bearer TOKEN", or empty
	client *http.Client
	// own is set when Close releases client's idle connections.
	own bool
}

// New returns a client of the node at base, an http:// or https:// URL with
// an optional path prefix (a node behind a reverse proxy) and no query,
// fragment or user info. It does not contact the node. Errors match
// metastore.ErrInvalidArgument and never repeat user info (a secret) of
// base.
func New(base string, opts *Options) (*Client, error) {
	if opts == nil {
		opts = &Options{}
	}
	u, err := url.Parse(base)
	bad := func(why string) (*Client, error) {
		return nil, fmt.Errorf("%w: node URL %q: %s (example: http://127.0.0.1:7070)", metastore.ErrInvalidArgument, nodeapi.RedactURL(base), why)
	}
	switch {
	case err != nil:
		return bad("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("the scheme must be http or https")
	case u.Host == "":
		return bad("no host")
	case u.User != nil:
		// A token in the URL ends up in shell history and process lists.
		return bad("user info is not accepted; give the token with " + TokenEnv + " or " + TokenFileEnv)
	case u.RawQuery != "" || u.ForceQuery:
		return bad("a node URL takes no query parameters")
	case u.Fragment != "":
		return bad("a node URL takes no fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return bad("port " + p + " is outside 1..65535")
		}
	}
	for i := 0; i < len(opts.Token); i++ {
		if c := opts.Token[i]; c <= ' ' || c >= 0x7f {
			return nil, fmt.Errorf("%w: the token must be visible ASCII without spaces", metastore.ErrInvalidArgument)
		}
	}
	c := &Client{
		base:   u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/"),
		client: opts.Client,
	}
	if opts.Token != "" {
		c.auth = nodeapi.BearerScheme + " " + opts.Token
	}
	if c.client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// The conformance suites and real callers run many concurrent
		// requests; the default of 2 idle connections per host would
		// churn connections (and TIME_WAIT sockets) under load.
		t.MaxIdleConnsPerHost = 64
		t.MaxIdleConns = 64
		c.client = &http.Client{Transport: t}
		c.own = true
	}
	return c, nil
}

// TokenFromEnv returns the node token from the environment: LAKE_TOKEN, or
// the contents of the file named by LAKE_TOKEN_FILE (surrounding whitespace
// trimmed); empty when neither is set. Both set is refused, since it is not
// clear which one is meant.
func TokenFromEnv() (string, error) {
	tok, file := os.Getenv(TokenEnv), os.Getenv(TokenFileEnv)
	switch {
	case tok != "" && file != "":
		return "", fmt.Errorf("%w: both %s and %s are set; set one", metastore.ErrInvalidArgument, TokenEnv, TokenFileEnv)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v", metastore.ErrInvalidArgument, TokenFileEnv, err)
		}
		tok = strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("%w: %s: the file %s is empty", metastore.ErrInvalidArgument, TokenFileEnv, file)
		}
	}
	return tok, nil
}

// Base returns the node's base URL, without a trailing "/".
func (c *Client) Base() string { return c.base }

// Shared returns a client that sends as c does, on c's connections, and
// whose Close releases nothing: for a view of the node (a datastore
// namespace) that must not close its parent's connections.
func (c *Client) Shared() *Client {
	s := *c
	s.own = false
	return &s
}

// Close releases the idle connections of the client's own http.Client (a
// given one is left alone).
func (c *Client) Close() {
	if c.own {
		c.client.CloseIdleConnections()
	}
}

// URL returns the URL of path (starting with "/") with query q (nil or
// empty: none).
func (c *Client) URL(path string, q url.Values) string {
	t := c.base + path
	if len(q) > 0 {
		t += "?" + q.Encode()
	}
	return t
}

// Do sends one request to target (a URL from URL) with body (nil: none)
// and the headers h, and returns the response for the caller to read and
// close, whatever its status. A transport failure is
// metastore.ErrUnavailable, or wraps ctx's error when ctx ended (so
// errors.Is(err, context.Canceled) holds).
func (c *Client) Do(ctx context.Context, method, target string, body []byte, h http.Header) (*http.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lake: %s %s: %w", method, target, err)
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, r)
	if err != nil {
		return nil, fmt.Errorf("lake: building a request for %s: %w", target, err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if c.auth != "" {
		req.Header.Set(nodeapi.AuthorizationHeader, c.auth)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("lake: %s %s: %w", method, target, cerr)
		}
		// Do's error repeats the URL; say it once. The cause stays in
		// the chain (errors.As for *net.OpError and the like).
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w: %s %s: %w (is a node running there? start one with `lake serve`)", metastore.ErrUnavailable, method, target, err)
		}
		return nil, fmt.Errorf("%w: %s %s: %w", metastore.ErrUnavailable, method, target, err)
	}
	return resp, nil
}

// Call sends req as JSON (nil: no body) to target and decodes the JSON
// answer into out (nil: none expected), reading at most limit bytes of it.
// A status other than 200 or 204 is the node's error (ErrorOf); what names
// the operation in errors.
func (c *Client) Call(ctx context.Context, method, target, what string, req, out any, limit int64) error {
	var body []byte
	var h http.Header
	if req != nil {
		b, err := json.Marshal(req)
		if err != nil {
			return fmt.Errorf("lake: encoding a %s request: %w", what, err)
		}
		body, h = b, http.Header{"Content-Type": {nodeapi.JSONMIMEType}}
	}
	resp, err := c.Do(ctx, method, target, body, h)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		return c.ErrorOf(resp, what)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, limit)).Decode(out); err != nil {
		return fmt.Errorf("%w: reading the answer to %s from %s: %v", metastore.ErrUnavailable, what, c.base, err)
	}
	return nil
}

// remoteError is an error the node answered: its message (from the node,
// starting with "lake: ") and the sentinel of its code.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// ErrorOf turns an error response into an error matching the metastore
// sentinel of its code (see the package doc); what, when not empty, names
// the operation in the error of a response that is not the node's.
func (c *Client) ErrorOf(resp *http.Response, what string) error {
	b, _ := ReadLimited(resp.Body, errorBodyLimit)
	var e nodeapi.Error
	if json.Unmarshal(b, &e) != nil || e.Code == "" {
		answer := fmt.Sprintf("%s answered %s", c.base, resp.Status)
		if what != "" {
			answer += " to " + what
		}
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return fmt.Errorf("%w: %s", metastore.ErrUnavailable, answer)
		}
		return fmt.Errorf("lake: %s, not a lake node's answer (is the URL right?)", answer)
	}
	if !strings.HasPrefix(e.Message, "lake: ") {
		e.Message = "lake: " + e.Message
	}
	if e.Code == nodeapi.CodeConflict {
		// Callers want the key of a conflict with errors.As; a
		// *ConflictError renders the same message the node sent.
		return &metastore.ConflictError{Key: e.Key, Reason: e.Reason}
	}
	sentinel := nodeapi.Sentinel(e.Code)
	if e.Code == nodeapi.CodeUnauthorized {
		sentinel = ErrUnauthorized
	}
	if sentinel == nil {
		return fmt.Errorf("%s (node %s, code %s)", e.Message, c.base, e.Code)
	}
	return &remoteError{msg: e.Message, sentinel: sentinel}
}

// ReadLimited reads all of r, failing if it holds more than limit bytes.
func ReadLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("the response is larger than %d bytes", limit)
	}
	return b, nil
}

// Items returns the node's items as the metastore's: a value the JSON left
// out (an empty value) is empty, never nil, as the metastore's contract
// says of every value.
func Items(in []nodeapi.Item) []metastore.Item {
	out := make([]metastore.Item, len(in))
	for i, it := range in {
		v := it.Value
		if v == nil {
			v = []byte{}
		}
		out[i] = metastore.Item{Key: it.Key, Value: v}
	}
	return out
}

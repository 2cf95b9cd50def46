// Package remotestore is the metastore.Driver that talks to a lake node
// (`lake serve`) over HTTP: every operation of the contract is one request
// to the node, which runs it on its own store. Its Name is "remote"; page
// positions are the node's own cursors, carried unchanged.
//
// # Errors
//
// The node answers errors as JSON with a code (package nodeapi);
// the driver maps each code back to its metastore sentinel, so errors.Is
// works on the client as on the node, and a conflict is a
// *metastore.ConflictError that names its key. A request that fails in
// transport (connection refused, reset, a proxy's 5xx) is
// metastore.ErrUnavailable: for a write, its outcome is unknown. The driver
// does not retry; ctx bounds every request.
//
// # Conditional writes
//
// CAS and Delete send If-Match with nodeapi.ETag of the expected value; the
// node compares it with the current value and then writes with the exact
// bytes it read as the expected value, so the check stays exact.
package remotestore

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

// Name is the backend name carried by this driver's cursors.
const Name = "remote"

// Environment variables that give the token to TokenFromEnv.
const (
	TokenEnv     = "LAKE_TOKEN"
	TokenFileEnv = "LAKE_TOKEN_FILE"
)

// ErrUnauthorized is returned when the node refused the token (or its
// absence). It is not a metastore sentinel: the store is fine, the client's
// configuration is not.
var ErrUnauthorized = errors.New("lake: unauthorized")

// Options configure New. The zero value is usable.
type Options struct {
	// Token is the node's bearer token; empty sends none.
	Token string
	// Client makes the requests; nil means a client of the driver's own
	// (keep-alive, up to 64 idle connections to the node), closed by
	// Close. A given client is the caller's and is not closed.
	Client *http.Client
}

// Driver is the HTTP client implementation of metastore.Driver.
type Driver struct {
	base      string // scheme://host[:port][/path], without a trailing "/"
	auth      string // "Bearer TOKEN", or empty
	client    *http.Client
	ownClient bool
}

var _ metastore.Driver = (*Driver)(nil)

// New returns a driver for the node at base, an http:// or https:// URL
// with an optional path prefix (a node behind a reverse proxy) and no
// query, fragment or user info. It does not contact the node.
func New(base string, opts *Options) (*Driver, error) {
	if opts == nil {
		opts = &Options{}
	}
	u, err := url.Parse(base)
	bad := func(why string) (*Driver, error) {
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
	d := &Driver{
		base:   u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/"),
		client: opts.Client,
	}
	if opts.Token != "" {
		d.auth = "Bearer " + opts.Token
	}
	if d.client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// The conformance suite and real callers run many concurrent
		// requests; the default of 2 idle connections per host would
		// churn connections (and TIME_WAIT sockets) under load.
		t.MaxIdleConnsPerHost = 64
		t.MaxIdleConns = 64
		d.client = &http.Client{Transport: t}
		d.ownClient = true
	}
	return d, nil
}

// OpenURL returns a driver for the node at raw (http:// or https://) with
// token (empty: none). It is what storeurl.Open uses for node URLs.
func OpenURL(raw, token string) (*Driver, error) {
	return New(raw, &Options{Token: token})
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

// Name returns "remote".
func (d *Driver) Name() string { return Name }

// URL returns the node's base URL.
func (d *Driver) URL() string { return d.base }

// Get returns the value of key.
func (d *Driver) Get(ctx context.Context, key string) ([]byte, error) {
	resp, err := d.do(ctx, http.MethodGet, kvPath(key), nil, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, d.errorOf(resp)
	}
	v, err := readLimited(resp.Body, metastore.MaxValueBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: reading the value of %q from %s: %v", metastore.ErrUnavailable, key, d.base, err)
	}
	// The ETag guards against a truncated or altered body: a value that
	// does not hash to it is not the value the node read.
	if tag := resp.Header.Get("ETag"); tag != "" && tag != nodeapi.ETag(v) {
		return nil, fmt.Errorf("%w: the value of %q from %s does not match its ETag", metastore.ErrUnavailable, key, d.base)
	}
	return v, nil
}

// Put writes value under key.
func (d *Driver) Put(ctx context.Context, key string, value []byte) error {
	return d.write(ctx, http.MethodPut, kvPath(key), value, nil)
}

// CAS writes value under key if its current state satisfies expect.
func (d *Driver) CAS(ctx context.Context, key string, expect metastore.Expect, value []byte) error {
	h := http.Header{}
	if expect.Absent() {
		h.Set("If-None-Match", "*")
	} else {
		h.Set("If-Match", nodeapi.ETag(expect.Value()))
	}
	return d.write(ctx, http.MethodPut, kvPath(key), value, h)
}

// Delete removes key if it holds exactly expected.
func (d *Driver) Delete(ctx context.Context, key string, expected []byte) error {
	h := http.Header{}
	h.Set("If-Match", nodeapi.ETag(expected))
	return d.write(ctx, http.MethodDelete, kvPath(key), nil, h)
}

// GuardedMutate applies target if guard and target.Expect both hold.
func (d *Driver) GuardedMutate(ctx context.Context, guard metastore.Guard, target metastore.Mutation) error {
	req := nodeapi.GuardedRequest{
		Guard:  nodeapi.GuardedGuard{Key: guard.Key, Value: nodeapi.EncodeBytes(guard.Value)},
		Target: nodeapi.GuardedTarget{Key: target.Key, Delete: target.Delete},
	}
	if target.Expect.Absent() {
		req.Target.ExpectAbsent = true
	} else {
		req.Target.Expect = nodeapi.EncodeBytes(target.Expect.Value())
	}
	if !target.Delete {
		req.Target.Value = nodeapi.EncodeBytes(target.Value)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("lake: encoding a guarded mutation: %w", err)
	}
	h := http.Header{}
	h.Set("Content-Type", nodeapi.JSONMIMEType)
	return d.write(ctx, http.MethodPost, nodeapi.GuardedPath, body, h)
}

// List returns one page of the node's List. pos is the node's cursor, as
// this driver returned it.
func (d *Driver) List(ctx context.Context, prefix string, limit int, pos []byte) ([]metastore.Item, []byte, error) {
	q := url.Values{}
	q.Set("prefix", prefix)
	q.Set("limit", strconv.Itoa(limit))
	if pos != nil {
		q.Set("cursor", string(pos))
	}
	resp, err := d.do(ctx, http.MethodGet, nodeapi.ListPath+"?"+q.Encode(), nil, nil)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, d.errorOf(resp)
	}
	// Decoded as it arrives, within a bound: the node's page is at most
	// limit items and metastore.MaxPageBytes (or one item) of keys and
	// values, so a larger body is not a node's answer.
	var page nodeapi.ListResponse
	err = json.NewDecoder(io.LimitReader(resp.Body, listBodyLimit(limit))).Decode(&page)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: reading a list page from %s: %v", metastore.ErrUnavailable, d.base, err)
	}
	items := make([]metastore.Item, len(page.Items))
	for i, it := range page.Items {
		v := it.Value
		if v == nil {
			v = []byte{}
		}
		items[i] = metastore.Item{Key: it.Key, Value: v}
	}
	var next []byte
	if page.Cursor != "" {
		next = []byte(page.Cursor)
	}
	return items, next, nil
}

// Close releases the driver's idle connections (of its own client only).
func (d *Driver) Close() error {
	if d.ownClient {
		d.client.CloseIdleConnections()
	}
	return nil
}

// kvPath returns the path of key's value.
func kvPath(key string) string { return nodeapi.KVPrefix + nodeapi.EscapeKey(key) }

// listBodyLimit bounds a list page's body: limit items of a maximal key
// with every byte JSON-escaped, the page's byte budget plus one maximal
// value in base64, and the cursor.
func listBodyLimit(limit int) int64 {
	values := int64(4 * (metastore.MaxPageBytes + metastore.MaxValueBytes + 2) / 3)
	return int64(limit)*int64(6*metastore.MaxKeyBytes+64) + values + 64<<10
}

// write sends a mutation and expects 204 No Content.
func (d *Driver) write(ctx context.Context, method, path string, body []byte, h http.Header) error {
	resp, err := d.do(ctx, method, path, body, h)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return d.errorOf(resp)
	}
	return nil
}

// do sends one request. A transport failure is ErrUnavailable (with the
// context's error when ctx ended, so errors.Is(err, context.Canceled) holds).
func (d *Driver) do(ctx context.Context, method, path string, body []byte, h http.Header) (*http.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lake: %s %s: %w", method, d.base+path, err)
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, d.base+path, r)
	if err != nil {
		return nil, fmt.Errorf("lake: building a request for %s: %w", d.base+path, err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if d.auth != "" {
		req.Header.Set("Authorization", d.auth)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("lake: %s %s: %w", method, d.base+path, cerr)
		}
		// Do's error repeats the URL; say it once. The cause stays in
		// the chain (errors.As for *net.OpError and the like).
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w: %s %s: %w (is a node running there? start one with `lake serve`)", metastore.ErrUnavailable, method, d.base+path, err)
		}
		return nil, fmt.Errorf("%w: %s %s: %w", metastore.ErrUnavailable, method, d.base+path, err)
	}
	return resp, nil
}

// remoteError is an error the node answered: its message (from the node,
// starting with "lake: ") and the sentinel of its code.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// errorOf turns an error response into an error matching the metastore
// sentinel of its code. A response that is not the node's JSON (a proxy's
// page) is classified by its status alone.
func (d *Driver) errorOf(resp *http.Response) error {
	b, _ := readLimited(resp.Body, 64<<10)
	var e nodeapi.Error
	if json.Unmarshal(b, &e) != nil || e.Code == "" {
		what := fmt.Sprintf("%s answered %s", d.base, resp.Status)
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return fmt.Errorf("%w: %s", metastore.ErrUnavailable, what)
		}
		return fmt.Errorf("lake: %s, not a lake node's answer (is the URL right?)", what)
	}
	if !strings.HasPrefix(e.Message, "lake: ") {
		e.Message = "lake: " + e.Message
	}
	if e.Code == nodeapi.CodeConflict {
		// The suite (and callers) want the key of a conflict with errors.As;
		// a *ConflictError renders the same message the node sent.
		return &metastore.ConflictError{Key: e.Key, Reason: e.Reason}
	}
	sentinel := nodeapi.Sentinel(e.Code)
	if e.Code == nodeapi.CodeUnauthorized {
		sentinel = ErrUnauthorized
	}
	if sentinel == nil {
		return fmt.Errorf("%s (node %s, code %s)", e.Message, d.base, e.Code)
	}
	return &remoteError{msg: e.Message, sentinel: sentinel}
}

// readLimited reads all of r, failing if it holds more than limit bytes.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("the response is larger than %d bytes", limit)
	}
	return b, nil
}

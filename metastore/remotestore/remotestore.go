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
// does not retry; ctx bounds every request. These rules are the node
// client's (package internal/nodeclient), which datastore/remotefs shares.
//
// # Conditional writes
//
// CAS and Delete send If-Match with nodeapi.ETag of the expected value; the
// node compares it with the current value and then writes with the exact
// bytes it read as the expected value, so the check stays exact.
package remotestore

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/lakemeta/lake/internal/nodeclient"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

// Name is the backend name carried by this driver's cursors.
const Name = "remote"

// Environment variables that give the token to TokenFromEnv (the node
// client's, package internal/nodeclient).
const (
	TokenEnv     = nodeclient.TokenEnv
	TokenFileEnv = nodeclient.TokenFileEnv
)

// ErrUnauthorized is returned when the node refused the token (or its
// absence). It is not a metastore sentinel: the store is fine, the client's
// configuration is not.
var ErrUnauthorized = nodeclient.ErrUnauthorized

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
	c *nodeclient.Client
}

var _ metastore.Driver = (*Driver)(nil)

// New returns a driver for the node at base, an http:// or https:// URL
// with an optional path prefix (a node behind a reverse proxy) and no
// query, fragment or user info. It does not contact the node.
func New(base string, opts *Options) (*Driver, error) {
	if opts == nil {
		opts = &Options{}
	}
	c, err := nodeclient.New(base, &nodeclient.Options{Token: opts.Token, Client: opts.Client})
	if err != nil {
		return nil, err
	}
	return &Driver{c: c}, nil
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
func TokenFromEnv() (string, error) { return nodeclient.TokenFromEnv() }

// Name returns "remote".
func (d *Driver) Name() string { return Name }

// URL returns the node's base URL.
func (d *Driver) URL() string { return d.c.Base() }

// Get returns the value of key.
func (d *Driver) Get(ctx context.Context, key string) ([]byte, error) {
	resp, err := d.do(ctx, http.MethodGet, kvPath(key), nil, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, d.c.ErrorOf(resp, "")
	}
	v, err := nodeclient.ReadLimited(resp.Body, metastore.MaxValueBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: reading the value of %q from %s: %v", metastore.ErrUnavailable, key, d.c.Base(), err)
	}
	// The ETag guards against a truncated or altered body: a value that
	// does not hash to it is not the value the node read.
	if tag := resp.Header.Get(nodeapi.ETagHeader); tag != "" && tag != nodeapi.ETag(v) {
		return nil, fmt.Errorf("%w: the value of %q from %s does not match its ETag", metastore.ErrUnavailable, key, d.c.Base())
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
		h.Set(nodeapi.IfNoneMatchHeader, "*")
	} else {
		h.Set(nodeapi.IfMatchHeader, nodeapi.ETag(expect.Value()))
	}
	return d.write(ctx, http.MethodPut, kvPath(key), value, h)
}

// Delete removes key if it holds exactly expected.
func (d *Driver) Delete(ctx context.Context, key string, expected []byte) error {
	h := http.Header{}
	h.Set(nodeapi.IfMatchHeader, nodeapi.ETag(expected))
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
	q.Set(nodeapi.ListPrefixParam, prefix)
	q.Set(nodeapi.ListLimitParam, strconv.Itoa(limit))
	if pos != nil {
		q.Set(nodeapi.ListCursorParam, string(pos))
	}
	resp, err := d.do(ctx, http.MethodGet, nodeapi.ListPath+"?"+q.Encode(), nil, nil)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, d.c.ErrorOf(resp, "")
	}
	// Decoded as it arrives, within a bound: the node's page is at most
	// limit items and metastore.MaxPageBytes (or one item) of keys and
	// values, so a larger body is not a node's answer.
	var page nodeapi.ListResponse
	err = json.NewDecoder(io.LimitReader(resp.Body, listBodyLimit(limit))).Decode(&page)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: reading a list page from %s: %v", metastore.ErrUnavailable, d.c.Base(), err)
	}
	items := nodeclient.Items(page.Items)
	var next []byte
	if page.Cursor != "" {
		next = []byte(page.Cursor)
	}
	return items, next, nil
}

// Close releases the driver's idle connections (of its own client only).
func (d *Driver) Close() error {
	d.c.Close()
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

// write sends a mutation and expects 204 No Content (or 200).
func (d *Driver) write(ctx context.Context, method, path string, body []byte, h http.Header) error {
	resp, err := d.do(ctx, method, path, body, h)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return d.c.ErrorOf(resp, "")
	}
	return nil
}

// do sends one request to path (with its query) on the node.
func (d *Driver) do(ctx context.Context, method, path string, body []byte, h http.Header) (*http.Response, error) {
	return d.c.Do(ctx, method, d.c.URL(path, nil), body, h)
}

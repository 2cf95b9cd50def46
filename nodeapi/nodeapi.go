// Package nodeapi is the wire format of the HTTP API of a lake node (`lake
// serve`): paths, headers, JSON bodies, error codes and the ETag function.
// The server (package server) and its clients (internal/nodeclient, under
// metastore/remotestore and datastore/remotefs) all use it, and no wire
// name is written anywhere else, so that the sides cannot drift apart;
// docs/node.md describes the same API for people and other languages.
//
// NB: everything here is on the wire between nodes and clients of different
// versions; names, codes and the ETag format must not change meaning.
package nodeapi

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/lakemeta/lake/metastore"
)

// Paths of the API. KVPrefix is followed by the URL-path-escaped key.
const (
	KVPrefix      = "/v1/kv/"
	GuardedPath   = "/v1/guarded-mutate"
	ListPath      = "/v1/list"
	CatalogPath   = "/v1/catalog"
	PausePath     = "/v1/admin/pause"
	ResumePath    = "/v1/admin/resume"
	HealthPath    = "/healthz"
	ReadyPath     = "/readyz"
	MetricsPath   = "/metrics"
	ValueMIMEType = "application/octet-stream"
	JSONMIMEType  = "application/json"
)

// ETag returns the strong entity tag of a value: the base64url (unpadded)
// SHA-256 of its bytes, in double quotes. The server sends it with every
// value and compares If-Match against it; the client computes it from the
// value it expects. The tag only selects the request's precondition: the
// server then compares the exact bytes it read (a CAS with that value), so a
// concurrent change is a conflict, never a lost update.
func ETag(value []byte) string {
	sum := sha256.Sum256(value)
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:]) + `"`
}

// EscapeKey returns key escaped for the path after KVPrefix. Every byte that
// is not unreserved is percent-encoded, "/" included, so the path has one
// segment; a key made only of dots is encoded too, so that no client,
// proxy or router mistakes it for a "." or ".." segment and resolves it away.
func EscapeKey(key string) string {
	if strings.Trim(key, ".") == "" {
		return strings.Repeat("%2E", len(key))
	}
	return url.PathEscape(key)
}

// UnescapeKey is the inverse of EscapeKey for the escaped path after
// KVPrefix. It also accepts unescaped "/" (curl users write
// /v1/kv/tbl/orders), so both spellings name the same key.
func UnescapeKey(escaped string) (string, error) {
	k, err := url.PathUnescape(escaped)
	if err != nil {
		return "", fmt.Errorf("%w: key in path is not valid percent-encoding: %v", metastore.ErrInvalidKey, err)
	}
	return k, nil
}

// Error codes of the JSON error body. Each names one metastore sentinel,
// except CodeUnauthorized, CodeTooLarge and CodeInternal.
const (
	CodeNotFound        = "not_found"
	CodeConflict        = "conflict"
	CodeInvalidKey      = "invalid_key"
	CodeInvalidValue    = "invalid_value"
	CodeReservedKey     = "reserved_key"
	CodeInvalidArgument = "invalid_argument"
	CodeInvalidCursor   = "invalid_cursor"
	CodeCursorExpired   = "cursor_expired"
	CodeWritesPaused    = "writes_paused"
	CodeRefused         = "refused"
	CodeDiverged        = "diverged"
	CodeUnavailable     = "unavailable"
	CodeUnauthorized    = "unauthorized"
	CodeTooLarge        = "too_large"
	// CodeRequestTimeout is a request whose body stopped arriving (408);
	// nothing was changed, and the client may retry.
	CodeRequestTimeout = "request_timeout"
	// CodeInternal is an error the node could not classify (a bug or an
	// unexpected backend failure); it is not known to be retryable.
	CodeInternal = "internal"
)

// codes maps each code that has a metastore sentinel to it, in the order
// errors are classified (the first match wins).
var codes = []struct {
	code     string
	sentinel error
}{
	{CodeNotFound, metastore.ErrNotFound},
	{CodeConflict, metastore.ErrConflict},
	{CodeReservedKey, metastore.ErrReservedKey},
	{CodeInvalidKey, metastore.ErrInvalidKey},
	{CodeInvalidValue, metastore.ErrInvalidValue},
	{CodeInvalidArgument, metastore.ErrInvalidArgument},
	{CodeInvalidCursor, metastore.ErrInvalidCursor},
	{CodeCursorExpired, metastore.ErrCursorExpired},
	{CodeWritesPaused, metastore.ErrWritesPaused},
	{CodeRefused, metastore.ErrRefused},
	// Before CodeUnavailable, which ErrDiverged matches too.
	{CodeDiverged, metastore.ErrDiverged},
	{CodeUnavailable, metastore.ErrUnavailable},
	// A store closed under a request (the node shutting down) is, for
	// the client, a node that is not available right now.
	{CodeUnavailable, metastore.ErrClosed},
	// A deadline or cancellation inside the node (a backend call that
	// outlived its time) leaves the outcome for the client to retry.
	{CodeUnavailable, context.DeadlineExceeded},
	{CodeUnavailable, context.Canceled},
}

// CodeOf returns the code of err, classified with errors.Is against the
// metastore sentinels; CodeInternal when none matches.
func CodeOf(err error) string {
	for _, c := range codes {
		if errors.Is(err, c.sentinel) {
			return c.code
		}
	}
	return CodeInternal
}

// Sentinel returns the metastore sentinel of code: ErrInvalidValue for
// CodeTooLarge (the value or body exceeded a limit), ErrUnavailable for
// CodeRequestTimeout (the body did not reach the node in time: a transport
// problem, not bad input), nil for CodeUnauthorized, CodeInternal and
// unknown codes.
func Sentinel(code string) error {
	switch code {
	case CodeTooLarge:
		return metastore.ErrInvalidValue
	case CodeRequestTimeout:
		return metastore.ErrUnavailable
	}
	for _, c := range codes {
		if c.code == code {
			return c.sentinel
		}
	}
	return nil
}

// Error is the JSON body of every error response.
type Error struct {
	// Code classifies the error (one of the Code constants).
	Code string `json:"code"`
	// Message says what went wrong; it starts with "lake: ".
	Message string `json:"message"`
	// Key names the key whose value differed, on a conflict.
	Key string `json:"key,omitempty"`
	// Reason says which condition failed, on a conflict.
	Reason string `json:"reason,omitempty"`
}

// Item is one key and its value in a listing; Value is base64 (standard
// alphabet, padded) in JSON.
type Item struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// ListResponse is the body of GET /v1/list: one page of the store's List.
type ListResponse struct {
	// Items is the page, in the store's page order; never null.
	Items []Item `json:"items"`
	// Cursor continues the listing; empty (and omitted) when done.
	Cursor string `json:"cursor,omitempty"`
}

// GuardedRequest is the body of POST /v1/guarded-mutate. Byte fields are
// pointers to base64 strings so that "absent" and "empty" differ.
type GuardedRequest struct {
	Guard  GuardedGuard  `json:"guard"`
	Target GuardedTarget `json:"target"`
}

// GuardedGuard is the guard of a GuardedRequest: Key holds exactly Value.
type GuardedGuard struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

// GuardedTarget is the target of a GuardedRequest. Exactly one of
// ExpectAbsent and Expect is given; Value is given unless Delete is set.
type GuardedTarget struct {
	Key          string  `json:"key"`
	ExpectAbsent bool    `json:"expect_absent,omitempty"`
	Expect       *string `json:"expect,omitempty"`
	Value        *string `json:"value,omitempty"`
	Delete       bool    `json:"delete,omitempty"`
}

// EncodeBytes returns b as the base64 string of a GuardedRequest field.
func EncodeBytes(b []byte) *string {
	s := base64.StdEncoding.EncodeToString(b)
	return &s
}

// CatalogResponse is the body of GET /v1/catalog: the node's in-memory copy
// of its catalog prefix.
type CatalogResponse struct {
	Prefix string `json:"prefix"`
	// Items are the catalog's items, sorted by key; never null.
	Items []Item `json:"items"`
	// Size is len(Items).
	Size int `json:"size"`
	// Bytes is the sum of the items' key and value lengths (bounded by
	// the node's catalog limit).
	Bytes int64 `json:"bytes"`
	// RefreshedAt is when the copy was read (RFC 3339).
	RefreshedAt string `json:"refreshed_at"`
	// AgeSeconds is how old the copy is.
	AgeSeconds float64 `json:"age_seconds"`
	// LastError is the error of the last refresh if it failed (the copy is
	// then the last good one), empty when the last refresh succeeded.
	LastError string `json:"last_error,omitempty"`
	// LastErrorAt is when that refresh failed (RFC 3339).
	LastErrorAt string `json:"last_error_at,omitempty"`
	// Next, in a paged read (?limit=N), is the last key of this page:
	// pass it as ?after= for the next page; empty on the last page.
	Next string `json:"next,omitempty"`
}

// PauseRequest is the optional body of POST /v1/admin/pause.
type PauseRequest struct {
	Reason string `json:"reason"`
}

// AdmissionResponse is the body of POST /v1/admin/pause and resume.
type AdmissionResponse struct {
	// Paused says whether mutations are refused now (by the operator or
	// by an external source such as a migration).
	Paused bool `json:"paused"`
	// Reason says why, when paused.
	Reason string `json:"reason,omitempty"`
	// Drained says, after a pause, that no mutation admitted before it is
	// still running.
	Drained bool `json:"drained,omitempty"`
}

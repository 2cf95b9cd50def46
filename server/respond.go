package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

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
	// The body must arrive within bodyTimeout; the deadline is lifted once
	// it has, so that a slow store call after it is not cut off.
	rc := http.NewResponseController(rq.w)
	rc.SetReadDeadline(time.Now().Add(rq.bodyTimeout))
	b, err := io.ReadAll(http.MaxBytesReader(rq.w, rq.r.Body, limit))
	rc.SetReadDeadline(time.Time{})
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge()
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, httpErr(http.StatusRequestTimeout, nodeapi.CodeRequestTimeout,
			fmt.Sprintf("lake: backend unavailable: the request body did not arrive within %v; nothing was changed", rq.bodyTimeout))
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
	case nodeapi.CodeRefused, nodeapi.CodeDiverged:
		return http.StatusConflict
	case nodeapi.CodeWritesPaused, nodeapi.CodeUnavailable:
		return http.StatusServiceUnavailable
	case nodeapi.CodeUnauthorized:
		return http.StatusUnauthorized
	case nodeapi.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case nodeapi.CodeRequestTimeout:
		return http.StatusRequestTimeout
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

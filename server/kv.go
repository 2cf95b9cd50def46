package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

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
	inm, err := parseCondition(rq.r, nodeapi.IfNoneMatchHeader)
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
	setETag(h, etag)
	// Reads are strongly consistent: a cache may keep the value only if it
	// revalidates it (If-None-Match) every time.
	h.Set("Cache-Control", "no-cache")
	if inm.present && inm.matches(etag, true) {
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
	ifMatch, ifNoneMatch, err := bothConditions(rq)
	if err != nil {
		s.fail(rq, err)
		return
	}
	switch {
	case ifMatch.present && ifNoneMatch.present:
		s.fail(rq, fmt.Errorf("%w: give If-Match or If-None-Match, not both", metastore.ErrInvalidArgument))
		return
	case ifNoneMatch.present && !ifNoneMatch.any:
		s.fail(rq, fmt.Errorf("%w: on PUT, If-None-Match supports only * (create if absent)", metastore.ErrInvalidArgument))
		return
	case ifNoneMatch.present:
		rq.op = "create"
	case ifMatch.present:
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
	setETag(rq.w.Header(), nodeapi.ETag(value))
	s.noContent(rq)
}

// current reads key and checks it against an If-Match list. It returns the
// exact bytes read, which the caller uses as the expected value of its
// conditional write: the store then compares bytes, so a change after this
// read is a conflict, not a lost update.
func (s *Server) current(ctx context.Context, key string, ifMatch condition) ([]byte, error) {
	cur, err := s.store.Get(ctx, key)
	if errors.Is(err, metastore.ErrNotFound) {
		return nil, metastore.Conflict(key, "If-Match: the key is absent")
	}
	if err != nil {
		return nil, err
	}
	if !ifMatch.matches(nodeapi.ETag(cur), false) {
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
	ifMatch, ifNoneMatch, err := bothConditions(rq)
	if err != nil {
		s.fail(rq, err)
		return
	}
	switch {
	case ifNoneMatch.present:
		s.fail(rq, fmt.Errorf("%w: DELETE takes If-Match, not If-None-Match", metastore.ErrInvalidArgument))
		return
	case !ifMatch.present:
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

// bothConditions parses If-Match and If-None-Match strictly.
func bothConditions(rq *request) (ifMatch, ifNoneMatch condition, err error) {
	if ifMatch, err = parseCondition(rq.r, nodeapi.IfMatchHeader); err != nil {
		return
	}
	ifNoneMatch, err = parseCondition(rq.r, nodeapi.IfNoneMatchHeader)
	return
}

package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

// handleList answers one page of the store's List, streamed: the page is
// bounded by its limit and by metastore.MaxPageBytes, and its base64 is
// written as it is encoded.
func (s *Server) handleList(rq *request) {
	q, err := query(rq, "prefix", "limit", "cursor")
	if err != nil {
		s.fail(rq, err)
		return
	}
	limit := metastore.DefaultPageSize
	if q.Has("limit") {
		l := q.Get("limit")
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
	st := s.startItems(rq, `{"items":[`)
	for _, it := range page.Items {
		st.item(it)
	}
	tail := "]"
	if page.Cursor != "" {
		tail += jsonMember("cursor", page.Cursor)
	}
	st.end(tail + "}\n")
}

// handleCatalog answers the catalog copy from memory, streamed; the copy
// itself is bounded by Options.CatalogMaxBytes.
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
	head := "{" + jsonString("prefix") + ":" + jsonString(s.catalog.prefix) +
		jsonMember("size", len(snap.items)) +
		jsonMember("bytes", snap.bytes) +
		jsonMember("refreshed_at", snap.refreshedAt.UTC().Format(time.RFC3339Nano)) +
		jsonMember("age_seconds", time.Since(snap.refreshedAt).Seconds())
	if snap.lastErr != nil {
		head += jsonMember("last_error", snap.lastErr.Error()) +
			jsonMember("last_error_at", snap.lastErrAt.UTC().Format(time.RFC3339Nano))
	}
	st := s.startItems(rq, head+`,"items":[`)
	for _, it := range snap.items {
		st.item(it)
	}
	st.end("]}\n")
}

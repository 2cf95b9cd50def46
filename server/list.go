package server

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

// handleList answers one page of the store's List, streamed: the page is
// bounded by its limit and by metastore.MaxPageBytes, and its base64 is
// written as it is encoded.
func (s *Server) handleList(rq *request) {
	q := rq.query
	limit, err := limitOf(q, metastore.DefaultPageSize)
	if err != nil {
		s.fail(rq, err)
		return
	}
	page, err := s.store.List(rq.r.Context(), q.Get(nodeapi.ListPrefixParam), limit, q.Get(nodeapi.ListCursorParam))
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

// limitOf returns the limit parameter of q (nodeapi.ListLimitParam, which
// is nodeapi.CatalogLimitParam too), or def when absent. The range is the
// store's to check (List) or the caller's.
func limitOf(q url.Values, def int) (int, error) {
	if !q.Has(nodeapi.ListLimitParam) {
		return def, nil
	}
	l := q.Get(nodeapi.ListLimitParam)
	n, err := strconv.Atoi(l)
	if err != nil {
		return 0, fmt.Errorf("%w: limit %q is not a number", metastore.ErrInvalidArgument, l)
	}
	return n, nil
}

// handleCatalog answers the catalog copy from memory, streamed; the copy
// itself is bounded by Options.CatalogMaxBytes. With limit (and after, the
// last key of the previous page) it answers one page of the copy in key
// order, and "next" to continue.
func (s *Server) handleCatalog(rq *request) {
	limit, err := limitOf(rq.query, 0)
	switch {
	case err != nil:
		s.fail(rq, err)
		return
	case rq.query.Has(nodeapi.CatalogLimitParam) && (limit < 1 || limit > metastore.MaxListLimit):
		s.fail(rq, fmt.Errorf("%w: catalog limit %d is outside 1..%d", metastore.ErrInvalidArgument, limit, metastore.MaxListLimit))
		return
	case rq.query.Has(nodeapi.CatalogAfterParam) && !rq.query.Has(nodeapi.CatalogLimitParam):
		s.fail(rq, fmt.Errorf("%w: catalog: after is the cursor of a paged read; give limit too", metastore.ErrInvalidArgument))
		return
	}
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
	items, tail := snap.items, "]}\n"
	if limit > 0 {
		// Keys are sorted: a page starts after the key given, so paging
		// goes on in key order even across refreshes of the copy.
		from, _ := slices.BinarySearchFunc(items, rq.query.Get(nodeapi.CatalogAfterParam), func(it metastore.Item, k string) int {
			return strings.Compare(it.Key, k)
		})
		if from < len(items) && rq.query.Has(nodeapi.CatalogAfterParam) && items[from].Key == rq.query.Get(nodeapi.CatalogAfterParam) {
			from++
		}
		items = items[from:]
		if len(items) > limit {
			items = items[:limit]
			tail = "]" + jsonMember("next", items[limit-1].Key) + "}\n"
		}
	}
	st := s.startItems(rq, head+`,"items":[`)
	for _, it := range items {
		st.item(it)
	}
	st.end(tail)
}

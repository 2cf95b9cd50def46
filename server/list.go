package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

func (s *Server) handleList(rq *request) {
	q := rq.r.URL.Query()
	for k, v := range q {
		if k != "prefix" && k != "limit" && k != "cursor" {
			s.fail(rq, fmt.Errorf("%w: unknown list parameter %q (known: prefix, limit, cursor)", metastore.ErrInvalidArgument, k))
			return
		}
		if len(v) != 1 {
			s.fail(rq, fmt.Errorf("%w: list parameter %q given %d times", metastore.ErrInvalidArgument, k, len(v)))
			return
		}
	}
	limit := metastore.DefaultPageSize
	if l := q.Get("limit"); l != "" || q.Has("limit") {
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
	s.json(rq, http.StatusOK, nodeapi.ListResponse{Items: wireItems(page.Items), Cursor: page.Cursor})
}

func wireItems(items []metastore.Item) []nodeapi.Item {
	out := make([]nodeapi.Item, len(items))
	for i, it := range items {
		v := it.Value
		if v == nil {
			v = []byte{} // "" in JSON, not null: an empty value is a value
		}
		out[i] = nodeapi.Item{Key: it.Key, Value: v}
	}
	return out
}

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
	resp := nodeapi.CatalogResponse{
		Prefix:      s.catalog.prefix,
		Items:       wireItems(snap.items),
		Size:        len(snap.items),
		RefreshedAt: snap.refreshedAt.UTC().Format(time.RFC3339Nano),
		AgeSeconds:  time.Since(snap.refreshedAt).Seconds(),
	}
	if snap.lastErr != nil {
		resp.LastError = snap.lastErr.Error()
		resp.LastErrorAt = snap.lastErrAt.UTC().Format(time.RFC3339Nano)
	}
	s.json(rq, http.StatusOK, resp)
}

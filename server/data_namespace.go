package server

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

// maxCachedNamespaces bounds the node's namespace Stores: past it one
// entry is forgotten per new name, so a client naming ever new namespaces
// costs a namespace lookup per request, never unbounded memory.
const maxCachedNamespaces = 1024

// nsCache holds the node's Store of each namespace requested, since making
// one can be a write (bolt creates the namespace's buckets). The zero
// value is empty and ready.
type nsCache struct {
	mu sync.Mutex
	m  map[string]*datastore.Store
	// limit replaces maxCachedNamespaces when positive (tests).
	limit int
}

// dataNamespace returns the namespace named by the request's query: "" when
// it names none (the root), else a valid namespace or the catalog's scope.
// Anything else is invalid, so that a typo never reaches another tree.
func dataNamespace(q url.Values) (string, error) {
	vs, ok := q[nodeapi.DataNamespaceParam]
	if !ok {
		return "", nil
	}
	name := vs[0]
	switch {
	case name == datastore.CatalogScope:
		return name, nil
	case name == "":
		return "", fmt.Errorf("%w: empty namespace parameter (send none for the default namespace)", metastore.ErrInvalidArgument)
	case strings.HasPrefix(name, "_"):
		return "", fmt.Errorf("%w: namespace %q: a name starting with '_' is an internal scope, and the only one a node serves is %s", metastore.ErrInvalidArgument, name, datastore.CatalogScope)
	}
	if err := datastore.ValidateNamespace(name); err != nil {
		return "", err
	}
	if name == datastore.DefaultNamespace {
		return "", nil
	}
	return name, nil
}

// dataScope returns the node's Store of namespace name (from
// dataNamespace): the root for "", else one made once and cached. A Store
// that could not be made (a damaged file, a read-only one without the
// namespace) is not cached, so that every request meets the refusal.
func (s *Server) dataScope(name string) (*datastore.Store, error) {
	if name == "" {
		return s.data, nil
	}
	c := &s.dataNS
	c.mu.Lock()
	st, ok := c.m[name]
	c.mu.Unlock()
	if ok {
		return st, nil
	}
	// Made outside the lock: making one may be a write transaction, which
	// must not hold up the requests of other namespaces. Two first requests
	// racing make it twice, harmlessly (the buckets are made if absent).
	var err error
	if name == datastore.CatalogScope {
		st, err = s.data.CatalogStore()
	} else {
		st, err = s.data.Namespace(name)
	}
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.m[name]; ok {
		return prev, nil
	}
	if c.m == nil {
		c.m = map[string]*datastore.Store{}
	}
	limit := maxCachedNamespaces
	if c.limit > 0 {
		limit = c.limit
	}
	if len(c.m) >= limit {
		for k := range c.m { // an arbitrary one: map order is random
			delete(c.m, k)
			break
		}
	}
	c.m[name] = st
	return st, nil
}

// dataDropPartition runs DropPartition after the checks Store.DropPartition
// makes, with the client's clock as Commit does.
func (s *Server) dataDropPartition(rq *request, ds *datastore.Store, body []byte) (any, error) {
	var req nodeapi.DataDropRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	if err := datastore.ValidatePartition(req.Partition); err != nil {
		return nil, err
	}
	if req.Fence != nil {
		if err := metastore.ValidateKey(req.Fence.Key); err != nil {
			return nil, fmt.Errorf("fence: %w", err)
		}
	}
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	release, err := s.admitWrite()
	if err != nil {
		return nil, err
	}
	defer release()
	st, err := ds.Driver().DropPartition(rq.r.Context(), req.Fence, req.Partition, req.Now)
	if err != nil {
		return nil, err
	}
	return st, nil
}

package server

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

// checkEdges refuses, before any handler runs, the header shapes that a
// lenient reading would turn into something the client did not mean
// (issue 26): a doubled Authorization header (which one would count?), and
// an If-Match or If-None-Match that is empty or malformed, or that the
// endpoint does not take (a condition silently ignored makes a conditional
// request unconditional). It runs on every method and path.
func checkEdges(r *http.Request, path string) error {
	if n := len(r.Header.Values(nodeapi.AuthorizationHeader)); n > 1 {
		return fmt.Errorf("%w: %d Authorization headers; send exactly one", metastore.ErrInvalidArgument, n)
	}
	takesMatch, takesNoneMatch := conditionsTaken(r.Method, path)
	for _, h := range []struct {
		name  string
		taken bool
	}{{nodeapi.IfMatchHeader, takesMatch}, {nodeapi.IfNoneMatchHeader, takesNoneMatch}} {
		c, err := parseCondition(r, h.name)
		if err != nil {
			return err
		}
		if c.present && !h.taken {
			return fmt.Errorf("%w: %s %s takes no %s header (see docs/node.md)", metastore.ErrInvalidArgument, r.Method, endpointName(path), h.name)
		}
	}
	return nil
}

// conditionsTaken says which condition headers method on path takes: only
// the key-value endpoints do (GET and HEAD If-None-Match, PUT both, DELETE
// If-Match); every other endpoint refuses both.
func conditionsTaken(method, path string) (ifMatch, ifNoneMatch bool) {
	if !strings.HasPrefix(path, nodeapi.KVPrefix) {
		return false, false
	}
	switch method {
	case http.MethodGet, http.MethodHead:
		return false, true
	case http.MethodPut:
		return true, true
	case http.MethodDelete:
		return true, false
	}
	return false, false
}

// endpointName names path in an error without echoing a key.
func endpointName(path string) string {
	if strings.HasPrefix(path, nodeapi.KVPrefix) {
		return nodeapi.KVPrefix + "KEY"
	}
	if len(path) > 64 {
		return path[:64] + "…"
	}
	return path
}

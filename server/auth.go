package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

// authorized reports whether r carries the node's token (always true on a
// node without one). The comparison is of SHA-256 sums in constant time, so
// neither the token's bytes nor its length leak through timing.
func (s *Server) authorized(r *http.Request) bool {
	if !s.hasToken {
		return true
	}
	scheme, tok, ok := strings.Cut(r.Header.Get(nodeapi.AuthorizationHeader), " ")
	if !ok || !strings.EqualFold(scheme, nodeapi.BearerScheme) {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) == 1
}

// validateToken refuses a token that cannot travel in a header as is.
func validateToken(tok string) error {
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("%w: the token must be visible ASCII without spaces (byte %d is 0x%02x)", metastore.ErrInvalidArgument, i, c)
		}
	}
	return nil
}

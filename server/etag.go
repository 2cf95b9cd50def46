package server

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

// condition is a parsed If-Match or If-None-Match header: absent, "*", or
// a list of entity tags.
type condition struct {
	present bool
	any     bool     // "*"
	tags    []string // each `"…"` or `W/"…"`
}

// parseCondition reads header name of r strictly. A header that is present
// but empty, whitespace, or not a list of entity tags (RFC 9110, 8.8.3) is
// an error: read as "no condition" it would turn a conditional write into
// an unconditional one.
func parseCondition(r *http.Request, name string) (condition, error) {
	vals, present := r.Header[http.CanonicalHeaderKey(name)]
	if !present {
		return condition{}, nil
	}
	c := condition{present: true}
	bad := func(why string) (condition, error) {
		return condition{}, fmt.Errorf("%w: %s: %s (want * or a list of \"ETAG\" values, such as the ETag of a GET)", metastore.ErrInvalidArgument, name, why)
	}
	for _, v := range vals {
		for _, t := range strings.Split(v, ",") {
			t = strings.Trim(t, " \t")
			switch {
			case t == "":
				return bad("empty entry")
			case t == "*":
				c.any = true
			case !isEntityTag(strings.TrimPrefix(t, "W/")):
				return bad(fmt.Sprintf("%q is not an entity tag", t))
			default:
				c.tags = append(c.tags, t)
			}
		}
	}
	if c.any && len(c.tags) > 0 {
		return bad("* cannot be combined with tags")
	}
	return c, nil
}

// isEntityTag reports whether t is an opaque-tag: a quoted string of
// etagc characters (no quote, no control character, no space).
func isEntityTag(t string) bool {
	if len(t) < 2 || t[0] != '"' || t[len(t)-1] != '"' {
		return false
	}
	for i := 1; i < len(t)-1; i++ {
		if c := t[i]; c <= ' ' || c == '"' || c == 0x7f {
			return false
		}
	}
	return true
}

// matches reports whether the condition matches etag. If-Match uses the
// strong comparison (a weak tag W/"..." never matches); If-None-Match the
// weak one (RFC 9110, 13.1).
func (c condition) matches(etag string, weak bool) bool {
	if c.any {
		return true
	}
	for _, t := range c.tags {
		if w, ok := strings.CutPrefix(t, "W/"); ok {
			if !weak {
				continue
			}
			t = w
		}
		if t == etag {
			return true
		}
	}
	return false
}

// setETag sets the ETag header spelled as RFC 9110 and docs/node.md spell it
// (Header.Set would send "Etag").
func setETag(h http.Header, etag string) { h[nodeapi.ETagHeader] = []string{etag} }

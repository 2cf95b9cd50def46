package server

import (
	"strings"
)

// etagListMatches reports whether an If-Match or If-None-Match header value
// (a comma-separated list of entity tags, or *) matches etag. If-Match uses
// the strong comparison (a weak tag W/"..." never matches); If-None-Match
// the weak one (RFC 9110, 13.1).
func etagListMatches(header, etag string, weak bool) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" {
			return true
		}
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

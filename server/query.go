package server

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/lakemeta/lake/metastore"
)

// query parses the request's query string strictly: a bad percent-escape,
// a ";" separator, an unknown name or a name given twice is an error (400),
// never a parameter silently dropped (a dropped cursor would restart a
// listing at page one, and a paging client would loop forever).
func query(rq *request, known ...string) (url.Values, error) {
	raw := rq.r.URL.RawQuery
	if strings.Contains(raw, ";") {
		return nil, fmt.Errorf("%w: query string: \";\" is not a separator; use \"&\" (and escape a \";\" in a value as %%3B)", metastore.ErrInvalidArgument)
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: query string: %v", metastore.ErrInvalidArgument, err)
	}
	for k, v := range q {
		if !slices.Contains(known, k) {
			if len(known) == 0 {
				return nil, fmt.Errorf("%w: this endpoint takes no query parameters, got %q", metastore.ErrInvalidArgument, k)
			}
			return nil, fmt.Errorf("%w: unknown parameter %q (known: %s)", metastore.ErrInvalidArgument, k, strings.Join(known, ", "))
		}
		if len(v) != 1 {
			return nil, fmt.Errorf("%w: parameter %q given %d times", metastore.ErrInvalidArgument, k, len(v))
		}
	}
	return q, nil
}

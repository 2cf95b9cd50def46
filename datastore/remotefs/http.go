package remotefs

import (
	"context"
	"net/http"
	"net/url"

	"github.com/lakemeta/lake/nodeapi"
)

// responseLimit bounds a JSON response: a page of MaxListLimit infos with
// metadata is bounded by the node's own body limits.
const responseLimit = 64 << 20

// call sends req (JSON, nil for none) to the operation op and decodes the
// JSON answer into out (nil: expect 204).
func (d *Driver) call(ctx context.Context, method, op string, req, out any) error {
	return d.c.Call(ctx, method, d.target(op, nil), op, req, out, responseLimit)
}

// do sends one request to the operation op with query q and returns the
// response unread.
func (d *Driver) do(ctx context.Context, method, op string, q url.Values, body []byte, h http.Header) (*http.Response, error) {
	return d.c.Do(ctx, method, d.target(op, q), body, h)
}

// target returns the URL of op with query q (nil: none) in d's namespace.
// Records are the root's in every namespace (datastore.Driver.Namespace),
// so a record request never carries one.
func (d *Driver) target(op string, q url.Values) string {
	if d.ns != "" && op != nodeapi.DataRecord {
		if q == nil {
			q = url.Values{}
		}
		q.Set(nodeapi.DataNamespaceParam, d.ns)
	}
	return d.c.URL(nodeapi.DataPrefix+op, q)
}

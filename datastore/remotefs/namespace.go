package remotefs

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/nodeapi"
)

// Wire names the node's datastore endpoints share with this driver (see
// docs/node.md, "The datastore"); server/data_namespace.go has the same.
const (
	// namespaceParam is the query parameter that names the namespace of
	// a request; a request without it is the root's.
	namespaceParam = "namespace"
	// dataDrop is the operation of DropPartition.
	dataDrop = "drop"
)

// dropRequest is the body of dataDrop.
type dropRequest struct {
	Fence     *datastore.Fence `json:"fence,omitempty"`
	Partition string           `json:"partition"`
	Now       time.Time        `json:"now"`
}

// scopeRE is the shape of an internal scope (datastore.CatalogScope): a
// user's namespace shape behind a '_'. Which scopes exist is the node's to
// say, so that this driver reaches a newer node's scopes.
var scopeRE = regexp.MustCompile(`^_[A-Za-z0-9._-]{1,63}$`)

// Namespace returns a driver that sends every datastore request but the
// records' with name as its namespace parameter ("" sends none: the
// root's). It shares d's client and makes no request; the node checks the
// name at the first one (an unknown internal scope is refused there). Its
// Close releases nothing.
func (d *Driver) Namespace(name string) (datastore.Driver, error) {
	if name != "" && !scopeRE.MatchString(name) {
		if err := datastore.ValidateNamespace(name); err != nil {
			return nil, err
		}
	}
	nd := *d
	nd.ns, nd.ownClient = name, false
	return &nd, nil
}

// DropPartition implements datastore.Driver: one request, which the node
// runs as one call of its own driver's DropPartition.
func (d *Driver) DropPartition(ctx context.Context, fence *datastore.Fence, partition string, now time.Time) (datastore.DropStats, error) {
	var st datastore.DropStats
	err := d.call(ctx, http.MethodPost, dataDrop, dropRequest{Fence: fence, Partition: partition, Now: now}, &st)
	return st, err
}

// target returns the URL of op with query q (nil: none) in d's namespace.
// Records are the root's in every namespace (datastore.Driver.Namespace),
// so a record request never carries one.
func (d *Driver) target(op string, q url.Values) string {
	if d.ns != "" && op != nodeapi.DataRecord {
		if q == nil {
			q = url.Values{}
		}
		q.Set(namespaceParam, d.ns)
	}
	t := d.base + nodeapi.DataPrefix + op
	if len(q) > 0 {
		t += "?" + q.Encode()
	}
	return t
}

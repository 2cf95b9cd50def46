package remotefs

import (
	"context"
	"net/http"
	"regexp"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/nodeapi"
)

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
	nd.ns, nd.c = name, d.c.Shared()
	return &nd, nil
}

// DropPartition implements datastore.Driver: one request, which the node
// runs as one call of its own driver's DropPartition.
func (d *Driver) DropPartition(ctx context.Context, fence *datastore.Fence, partition string, now time.Time) (datastore.DropStats, error) {
	var st datastore.DropStats
	err := d.call(ctx, http.MethodPost, nodeapi.DataDrop, nodeapi.DataDropRequest{Fence: fence, Partition: partition, Now: now}, &st)
	return st, err
}

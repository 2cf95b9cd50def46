package remotefs

import (
	"context"
	"net/http"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/nodeapi"
)

var _ datastore.Checker = (*Driver)(nil)

// Check implements datastore.Checker (lake data check) with one request:
// the node runs the check on its own driver in d's namespace and answers
// the report, whose objects are named as the node's driver names them. A
// node whose driver has no check answers metastore.ErrRefused. A repair
// needs o.Fence (the namespace lock's, taken through this node), which the
// node's driver checks against the lock's record before it writes.
func (d *Driver) Check(ctx context.Context, o datastore.CheckOptions) (datastore.CheckReport, error) {
	var rep datastore.CheckReport
	err := d.call(ctx, http.MethodPost, nodeapi.DataCheck, nodeapi.DataCheckRequest{Repair: o.Repair, Chunks: o.Chunks, Fence: o.Fence, Now: o.Now}, &rep)
	return rep, err
}

// ChecksRegistryRecord implements datastore.RegistryChecker: the node's
// own Store.Check checks the namespace's registry record.
func (d *Driver) ChecksRegistryRecord() bool { return true }

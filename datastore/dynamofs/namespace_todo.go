package dynamofs

import (
	"context"
	"errors"
	"time"

	"github.com/lakemeta/lake/datastore"
)

// TODO(issue 19): replaced by the driver's namespaces and DropPartition.
var errTODO = errors.New("lake: not yet implemented")

// Namespace is not yet implemented.
func (d *Driver) Namespace(name string) (datastore.Driver, error) { return nil, errTODO }

// DropPartition is not yet implemented.
func (d *Driver) DropPartition(ctx context.Context, fence *datastore.Fence, partition string, now time.Time) (datastore.DropStats, error) {
	return datastore.DropStats{}, errTODO
}

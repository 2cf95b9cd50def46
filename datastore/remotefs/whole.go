package remotefs

import (
	"context"
	"fmt"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/nodeapi"
)

// CommitsWhole implements datastore.WholeCommitter: true when the node's
// datastore commits whole (bolt, DynamoDB), so that a commit of up to
// nodeapi.DataMaxWholeCommit entries is one request and atomic on the node.
func (d *Driver) CommitsWhole() bool { return d.whole }

var _ datastore.WholeCommitter = (*Driver)(nil)

// commitParts sends a commit of more than nodeapi.DataMaxWholeCommit entries
// in requests of that many, in order: each atomic, the whole not (a crash in
// between leaves it partly applied, as on a driver that does not commit
// whole).
func (d *Driver) commitParts(ctx context.Context, fence *datastore.Fence, entries []datastore.Entry, now time.Time) ([]datastore.Info, error) {
	var out []datastore.Info
	for start := 0; start < len(entries); start += nodeapi.DataMaxWholeCommit {
		part, err := d.Commit(ctx, fence, entries[start:min(start+nodeapi.DataMaxWholeCommit, len(entries))], now)
		if err != nil {
			if start > 0 {
				return out, fmt.Errorf("%w (the first %d of %d entries were committed; the next sync completes the rest)", err, start, len(entries))
			}
			return nil, err
		}
		out = append(out, part...)
	}
	return out, nil
}

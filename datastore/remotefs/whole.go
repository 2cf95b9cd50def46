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

// maxInlineBody bounds the inline content one commit request carries (raw
// bytes; base64 in the JSON makes them a third more), well inside
// nodeapi.DataBodyLimit with room for the rest of the entries. A variable
// for the tests only.
var maxInlineBody = nodeapi.DataBodyLimit / 4

// spillInline returns entries with the inline files past maxInlineBody
// uploaded as chunks instead (an upload intent, then one chunk each, under
// their own version), so that a commit of many small files stays one
// atomic request the node accepts rather than a body it refuses as too
// large; the node then proves those files against their chunks.
func (d *Driver) spillInline(ctx context.Context, entries []datastore.Entry) ([]datastore.Entry, error) {
	total := 0
	var out []datastore.Entry
	for i, e := range entries {
		if e.Put == nil || len(e.Put.Inline) == 0 {
			continue
		}
		if total += len(e.Put.Inline); total <= maxInlineBody {
			continue
		}
		if out == nil {
			out = append([]datastore.Entry(nil), entries...)
		}
		st := *e.Put
		data := st.Inline
		st.Inline, st.Chunks = nil, 1
		if err := d.BeginUpload(ctx, st); err != nil {
			return nil, err
		}
		if err := d.PutChunk(ctx, st.Version, 0, data); err != nil {
			return nil, err
		}
		d.started.Delete(st.Version) // its one chunk is PUT
		out[i] = datastore.Entry{Put: &st}
	}
	if out == nil {
		return entries, nil
	}
	return out, nil
}

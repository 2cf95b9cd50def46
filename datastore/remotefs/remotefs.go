// Package remotefs is the datastore.Driver that talks to a lake node (`lake
// serve`) serving a datastore: each driver method is one request to the
// node's /v1/data/ endpoints (package nodeapi), which runs it on the node's
// own datastore driver. Several processes on one machine share an embedded
// bolt datastore this way, since one process holds the bolt file. A
// namespace's driver (Namespace) names its namespace in a query parameter
// of each request but the records', which are the root's in every one.
//
// Errors are the node's, mapped back to the metastore sentinels (and to
// datastore.ErrHorizon and datastore.ErrUploadExpired); a conflict is a
// *metastore.ConflictError with its key and reason, so
// datastore.IsFenceConflict works on the client. A request that fails in
// transport is metastore.ErrUnavailable: for a write, its outcome is
// unknown. The driver does not retry. These rules are the node client's
// (package internal/nodeclient), which metastore/remotestore shares.
package remotefs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/nodeclient"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

// Name is the backend name carried by this driver's cursors.
const Name = "remote"

// Options configure Open. The zero value is usable.
type Options struct {
	// Token is the node's bearer token; empty sends none.
	Token string
	// Client makes the requests; nil means a client of the driver's own.
	Client *http.Client
}

// Driver is the HTTP client implementation of datastore.Driver.
type Driver struct {
	// c is the node client (package internal/nodeclient, shared with
	// metastore/remotestore): base URL, token, errors.
	c         *nodeclient.Client
	maxCommit int
	whole     bool // the node commits whole (whole.go)
	backend   string
	// ns is the namespace every request but a record's names ("" for the
	// root).
	ns string
	// started remembers when each upload this client began started, for
	// its chunk PUTs (nodeapi.DataChunkStarted); shared by every namespace
	// of the root.
	started *sync.Map // version → time.Time
}

var _ datastore.Driver = (*Driver)(nil)

// Open returns a driver for the node at base (http:// or https://, as for
// the metastore's remote driver). It asks the node once what it serves,
// so that a node without a datastore is refused at once.
func Open(ctx context.Context, base string, opts *Options) (*Driver, error) {
	if opts == nil {
		opts = &Options{}
	}
	c, err := nodeclient.New(base, &nodeclient.Options{Token: opts.Token, Client: opts.Client})
	if err != nil {
		return nil, err
	}
	d := &Driver{c: c, started: new(sync.Map)}
	var info nodeapi.DataInfoResponse
	if err := d.call(ctx, http.MethodGet, nodeapi.DataInfo, nil, &info); err != nil {
		d.Close()
		return nil, err
	}
	if info.MaxCommit < 1 {
		d.Close()
		return nil, fmt.Errorf("lake: node %s answered a max commit of %d", d.c.Base(), info.MaxCommit)
	}
	d.maxCommit, d.backend, d.whole = info.MaxCommit, info.Backend, info.Whole
	return d, nil
}

// Name returns "remote".
func (d *Driver) Name() string { return Name }

// Backend returns the name of the node's own datastore driver.
func (d *Driver) Backend() string { return d.backend }

// MaxCommit is the node's: its driver's bound, at most nodeapi.DataMaxCommit.
func (d *Driver) MaxCommit() int { return d.maxCommit }

// BeginUpload implements datastore.Driver.
func (d *Driver) BeginUpload(ctx context.Context, s datastore.Staged) error {
	if err := d.call(ctx, http.MethodPost, nodeapi.DataUpload, s, nil); err != nil {
		return err
	}
	d.started.Store(s.Version, s.Started)
	return nil
}

func chunkQuery(version string, i int) url.Values {
	return url.Values{nodeapi.DataChunkVersion: {version}, nodeapi.DataChunkIndex: {strconv.Itoa(i)}}
}

// PutChunk implements datastore.Driver. It names when the upload's intent
// began, so that the node can check the intent is live (issue 26).
func (d *Driver) PutChunk(ctx context.Context, version string, i int, data []byte) error {
	q := chunkQuery(version, i)
	if t, ok := d.started.Load(version); ok {
		q.Set(nodeapi.DataChunkStarted, t.(time.Time).Format(time.RFC3339Nano))
	}
	resp, err := d.do(ctx, http.MethodPut, nodeapi.DataChunk, q, data, http.Header{"Content-Type": {nodeapi.ValueMIMEType}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return d.c.ErrorOf(resp, "")
	}
	return nil
}

// GetChunk implements datastore.Driver.
func (d *Driver) GetChunk(ctx context.Context, version string, i int) ([]byte, error) {
	resp, err := d.do(ctx, http.MethodGet, nodeapi.DataChunk, chunkQuery(version, i), nil, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, d.c.ErrorOf(resp, "")
	}
	// At most one byte more than a chunk: a longer chunk (a foreign
	// object under the node's store) comes back as ChunkSize+1 bytes,
	// which the datastore's checks call a damaged file.
	b, err := io.ReadAll(io.LimitReader(resp.Body, datastore.ChunkSize+1))
	if err != nil || (len(b) <= datastore.ChunkSize && resp.ContentLength >= 0 && int64(len(b)) != resp.ContentLength) {
		return nil, fmt.Errorf("%w: reading chunk %d of %s from %s: %v", metastore.ErrUnavailable, i, version, d.c.Base(), err)
	}
	return b, nil
}

// Commit implements datastore.Driver.
func (d *Driver) Commit(ctx context.Context, fence *datastore.Fence, entries []datastore.Entry, now time.Time) ([]datastore.Info, error) {
	for _, e := range entries {
		if e.Put != nil {
			d.started.Delete(e.Put.Version) // its chunks are all PUT by now
		}
	}
	if d.whole && len(entries) > nodeapi.DataMaxWholeCommit {
		return d.commitParts(ctx, fence, entries, now) // whole.go
	}
	entries, err := d.spillInline(ctx, entries) // whole.go
	if err != nil {
		return nil, err
	}
	var out nodeapi.DataInfos
	err = d.call(ctx, http.MethodPost, nodeapi.DataCommit, nodeapi.DataCommitRequest{Fence: fence, Entries: entries, Now: now}, &out)
	if errors.Is(err, metastore.ErrRefused) {
		return nil, fmt.Errorf("%w (%v)", datastore.ErrUploadExpired, err)
	}
	return out.Infos, err
}

// Stat implements datastore.Driver.
func (d *Driver) Stat(ctx context.Context, paths []string) (map[string]datastore.Info, error) {
	out := map[string]datastore.Info{}
	for start := 0; start < len(paths); start += datastore.MaxListLimit {
		var r nodeapi.DataInfos
		if err := d.call(ctx, http.MethodPost, nodeapi.DataStat, nodeapi.DataRequest{Paths: paths[start:min(start+datastore.MaxListLimit, len(paths))]}, &r); err != nil {
			return nil, err
		}
		for _, i := range r.Infos {
			out[i.Path] = i
		}
	}
	return out, nil
}

// List implements datastore.Driver.
func (d *Driver) List(ctx context.Context, prefix string, limit int, pos []byte) ([]datastore.Info, []byte, error) {
	var r nodeapi.DataListResponse
	err := d.call(ctx, http.MethodPost, nodeapi.DataList, nodeapi.DataRequest{Prefix: prefix, Limit: limit, Pos: pos}, &r)
	return r.Files, r.Next, err
}

// Head implements datastore.Driver.
func (d *Driver) Head(ctx context.Context, partition string) (datastore.Head, error) {
	var r nodeapi.DataHeadsResponse
	if err := d.call(ctx, http.MethodPost, nodeapi.DataHead, nodeapi.DataRequest{Partition: partition}, &r); err != nil {
		return datastore.Head{}, err
	}
	if len(r.Heads) != 1 {
		return datastore.Head{}, fmt.Errorf("%w: node %s answered %d heads for one partition", metastore.ErrUnavailable, d.c.Base(), len(r.Heads))
	}
	return r.Heads[0], nil
}

// Changes implements datastore.Driver.
func (d *Driver) Changes(ctx context.Context, partition string, after uint64, limit int) ([]datastore.Info, uint64, error) {
	var r nodeapi.DataInfos
	err := d.call(ctx, http.MethodPost, nodeapi.DataChanges, nodeapi.DataRequest{Partition: partition, After: after, Limit: limit}, &r)
	if errors.Is(err, metastore.ErrCursorExpired) {
		return nil, 0, fmt.Errorf("%w (%v)", datastore.ErrHorizon, err)
	}
	return r.Infos, r.UpTo, err
}

// Partitions implements datastore.Driver.
func (d *Driver) Partitions(ctx context.Context) ([]string, error) {
	var r nodeapi.DataHeadsResponse
	err := d.call(ctx, http.MethodPost, nodeapi.DataPartitions, nodeapi.DataRequest{}, &r)
	return r.Partitions, err
}

// ChangedPartitions implements datastore.Driver.
func (d *Driver) ChangedPartitions(ctx context.Context, cursor []byte) ([]datastore.Head, []byte, error) {
	var r nodeapi.DataHeadsResponse
	err := d.call(ctx, http.MethodPost, nodeapi.DataChangedPartitions, nodeapi.DataRequest{Pos: cursor}, &r)
	return r.Heads, r.Next, err
}

// Reclaim implements datastore.Driver.
func (d *Driver) Reclaim(ctx context.Context, now time.Time, o datastore.ReclaimOptions) (datastore.ReclaimStats, error) {
	var st datastore.ReclaimStats
	err := d.call(ctx, http.MethodPost, nodeapi.DataReclaim, nodeapi.DataReclaimRequest{Now: now, Grace: int64(o.Grace), UploadGrace: int64(o.UploadGrace), Horizon: int64(o.Horizon)}, &st)
	return st, err
}

// Close releases the driver's idle connections (of its own client only).
func (d *Driver) Close() error {
	d.c.Close()
	return nil
}

package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

// handleData serves the datastore's endpoints (nodeapi.DataPrefix): each
// runs one method of the node's datastore driver, after the checks the
// portable datastore.Store would make, since the driver assumes them.
func (s *Server) handleData(rq *request, path string) {
	op := strings.TrimPrefix(path, nodeapi.DataPrefix)
	// The op labels metrics: only known operations, so that a client
	// cannot mint label values.
	rq.op = "data_unknown"
	if dataOps[op] {
		rq.op = "data_" + op
	}
	if s.data == nil {
		s.fail(rq, httpErr(http.StatusNotFound, nodeapi.CodeInvalidArgument, "lake: invalid argument: this node serves no datastore"))
		return
	}
	if op == nodeapi.DataChunk {
		s.handleChunk(rq)
		return
	}
	if op == nodeapi.DataInfo {
		if !s.allow(rq, http.MethodGet) {
			return
		}
		// The node's, the same in every namespace: it takes none.
		if _, err := query(rq); err != nil {
			s.fail(rq, err)
			return
		}
		s.json(rq, http.StatusOK, nodeapi.DataInfoResponse{Backend: s.data.Driver().Name(), MaxCommit: s.dataMaxCommit(), Whole: s.data.CommitsWhole()})
		return
	}
	if !s.allow(rq, http.MethodPost) {
		return
	}
	q, err := query(rq, nodeapi.DataNamespaceParam)
	if err != nil {
		s.fail(rq, err)
		return
	}
	ns, err := dataNamespace(q)
	if err != nil {
		s.fail(rq, err)
		return
	}
	body, err := readBody(rq, nodeapi.DataBodyLimit)
	if err != nil {
		s.fail(rq, err)
		return
	}
	var out any
	switch op {
	case nodeapi.DataUpload, nodeapi.DataCommit, nodeapi.DataReclaim, nodeapi.DataDrop:
		out, err = s.dataWrite(rq, ns, op, body)
	case nodeapi.DataRecord:
		// Records are the root's in every namespace (a commit in any
		// namespace is fenced on any lock record): the namespace, checked
		// above, changes nothing here.
		out, err = s.dataRecord(rq, body)
	case nodeapi.DataCheck:
		out, err = s.dataCheck(rq, ns, body)
	case nodeapi.DataStat, nodeapi.DataList, nodeapi.DataHead, nodeapi.DataChanges, nodeapi.DataPartitions, nodeapi.DataChangedPartitions:
		out, err = s.dataRead(rq, ns, op, body)
	default:
		err = httpErr(http.StatusNotFound, nodeapi.CodeInvalidArgument, "lake: invalid argument: no endpoint "+path+" (see docs/node.md)")
	}
	switch {
	case err != nil:
		s.fail(rq, err)
	case out == nil:
		s.noContent(rq)
	default:
		s.json(rq, http.StatusOK, out)
	}
}

var dataOps = map[string]bool{
	nodeapi.DataInfo: true, nodeapi.DataUpload: true, nodeapi.DataChunk: true, nodeapi.DataCommit: true,
	nodeapi.DataStat: true, nodeapi.DataList: true, nodeapi.DataHead: true, nodeapi.DataChanges: true,
	nodeapi.DataPartitions: true, nodeapi.DataChangedPartitions: true, nodeapi.DataReclaim: true, nodeapi.DataRecord: true,
	nodeapi.DataDrop: true, nodeapi.DataCheck: true,
}

func (s *Server) dataMaxCommit() int { return min(s.data.Driver().MaxCommit(), nodeapi.DataMaxCommit) }

// admitWrite passes a datastore write through the node's write admission.
func (s *Server) admitWrite() (func(), error) {
	if err := s.admission.Check(); err != nil {
		return nil, err
	}
	return s.admission.Admit()
}

func (s *Server) dataWrite(rq *request, ns, op string, body []byte) (any, error) {
	ds, err := s.dataScope(ns)
	if err != nil {
		return nil, err
	}
	ctx, d := rq.r.Context(), ds.Driver()
	switch op {
	case nodeapi.DataDrop:
		return s.dataDropPartition(rq, ds, body)
	case nodeapi.DataUpload:
		var st datastore.Staged
		if err := decodeJSON(body, &st); err != nil {
			return nil, err
		}
		if err := datastore.CheckStaged(st); err != nil {
			return nil, err
		}
		release, err := s.admitWrite()
		if err != nil {
			return nil, err
		}
		defer release()
		return nil, d.BeginUpload(ctx, st)
	case nodeapi.DataCommit:
		var req nodeapi.DataCommitRequest
		if err := decodeJSON(body, &req); err != nil {
			return nil, err
		}
		bound := s.dataMaxCommit()
		if s.data.CommitsWhole() { // a commit of any size is atomic there (issue 30)
			bound = nodeapi.DataMaxWholeCommit
		}
		if err := datastore.CheckCommit(req.Fence, req.Entries, bound); err != nil {
			return nil, err
		}
		// The node is the trust boundary for remote clients: it proves each
		// staged file against the chunks it holds (count, sizes, SHA-256
		// computed here) before anything applies, never taking the
		// client's word (issue 26).
		for _, e := range req.Entries {
			if e.Put != nil {
				if err := datastore.VerifyStaged(ctx, d, *e.Put); err != nil {
					return nil, err
				}
			}
		}
		release, err := s.admitWrite()
		if err != nil {
			return nil, err
		}
		defer release()
		infos, err := d.Commit(ctx, req.Fence, req.Entries, req.Now)
		if err != nil {
			return nil, err
		}
		return nodeapi.DataInfos{Infos: nonNilInfos(infos)}, nil
	default: // reclaim
		var req nodeapi.DataReclaimRequest
		if err := decodeJSON(body, &req); err != nil {
			return nil, err
		}
		o := datastore.ReclaimOptions{Grace: time.Duration(req.Grace), UploadGrace: time.Duration(req.UploadGrace), Horizon: time.Duration(req.Horizon)}
		if o.Grace <= 0 || o.UploadGrace <= 0 || o.Horizon <= 0 {
			return nil, fmt.Errorf("%w: reclaim needs a positive grace, upload grace and horizon", metastore.ErrInvalidArgument)
		}
		release, err := s.admitWrite()
		if err != nil {
			return nil, err
		}
		defer release()
		st, err := d.Reclaim(ctx, req.Now, o)
		if err != nil {
			return nil, err
		}
		return st, nil
	}
}

func (s *Server) dataRead(rq *request, ns, op string, body []byte) (any, error) {
	var req nodeapi.DataRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	ds, err := s.dataScope(ns)
	if err != nil {
		return nil, err
	}
	ctx, d := rq.r.Context(), ds.Driver()
	switch op {
	case nodeapi.DataStat:
		if len(req.Paths) > datastore.MaxListLimit {
			return nil, fmt.Errorf("%w: %d paths in one stat, more than %d", metastore.ErrInvalidArgument, len(req.Paths), datastore.MaxListLimit)
		}
		m, err := ds.StatMany(ctx, req.Paths)
		if err != nil {
			return nil, err
		}
		out := nodeapi.DataInfos{Infos: []datastore.Info{}}
		for _, i := range m {
			out.Infos = append(out.Infos, i)
		}
		return out, nil
	case nodeapi.DataList:
		if req.Limit < 1 || req.Limit > datastore.MaxListLimit || len(req.Prefix) > datastore.MaxPathBytes {
			return nil, fmt.Errorf("%w: list limit %d or prefix", metastore.ErrInvalidArgument, req.Limit)
		}
		files, next, err := d.List(ctx, req.Prefix, req.Limit, req.Pos)
		if err != nil {
			return nil, err
		}
		return nodeapi.DataListResponse{Files: nonNilInfos(files), Next: next}, nil
	case nodeapi.DataHead:
		h, err := ds.Head(ctx, req.Partition)
		if err != nil {
			return nil, err
		}
		return nodeapi.DataHeadsResponse{Heads: []datastore.Head{h}}, nil
	case nodeapi.DataChanges:
		ch, upTo, err := ds.Changes(ctx, req.Partition, req.After, req.Limit)
		if err != nil {
			return nil, err
		}
		return nodeapi.DataInfos{Infos: nonNilInfos(ch), UpTo: upTo}, nil
	case nodeapi.DataPartitions:
		parts, err := ds.Partitions(ctx)
		if err != nil {
			return nil, err
		}
		return nodeapi.DataHeadsResponse{Partitions: parts}, nil
	default: // changed partitions
		heads, next, err := d.ChangedPartitions(ctx, req.Pos)
		if err != nil {
			return nil, err
		}
		return nodeapi.DataHeadsResponse{Heads: heads, Next: next}, nil
	}
}

func (s *Server) dataRecord(rq *request, body []byte) (any, error) {
	ctx, r := rq.r.Context(), s.data.Records()
	var req nodeapi.DataRecordRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	expect := metastore.ExpectValue(req.Expect)
	if req.ExpectAbsent {
		expect = metastore.ExpectAbsent()
	}
	if req.Op == nodeapi.DataRecordGet || req.Op == nodeapi.DataRecordList {
		if req.Op == nodeapi.DataRecordGet {
			v, err := r.GetRecord(ctx, req.Key)
			if err != nil {
				return nil, err
			}
			return nodeapi.DataRecordResponse{Value: v}, nil
		}
		items, err := r.ListRecords(ctx, req.Prefix)
		if err != nil {
			return nil, err
		}
		out := nodeapi.DataRecordResponse{Items: []nodeapi.Item{}}
		for _, it := range items {
			out.Items = append(out.Items, nodeapi.Item{Key: it.Key, Value: it.Value})
		}
		return out, nil
	}
	release, err := s.admitWrite()
	if err != nil {
		return nil, err
	}
	defer release()
	switch req.Op {
	case nodeapi.DataRecordCAS:
		return nil, r.CASRecord(ctx, req.Key, expect, req.Value)
	case nodeapi.DataRecordDelete:
		return nil, r.DeleteRecord(ctx, req.Key, req.Expect)
	case nodeapi.DataRecordFenced:
		if req.Fence == nil {
			return nil, fmt.Errorf("%w: a fenced record write needs a fence", metastore.ErrInvalidArgument)
		}
		return nil, r.FencedRecord(ctx, *req.Fence, req.Key, expect, req.Value)
	}
	return nil, fmt.Errorf("%w: record op %q: want get, cas, delete, list or fenced", metastore.ErrInvalidArgument, req.Op)
}

// handleChunk stores (PUT) or returns (GET) one chunk as raw bytes.
func (s *Server) handleChunk(rq *request) {
	q, err := query(rq, nodeapi.DataChunkVersion, nodeapi.DataChunkIndex, nodeapi.DataChunkStarted, nodeapi.DataNamespaceParam)
	if err != nil {
		s.fail(rq, err)
		return
	}
	ns, err := dataNamespace(q)
	if err != nil {
		s.fail(rq, err)
		return
	}
	version := q.Get(nodeapi.DataChunkVersion)
	i, ierr := strconv.Atoi(q.Get(nodeapi.DataChunkIndex))
	if err := datastore.CheckVersion(version); err != nil {
		s.fail(rq, err)
		return
	}
	if ierr != nil || i < 0 || i > 1<<30 {
		s.fail(rq, fmt.Errorf("%w: chunk number %q", metastore.ErrInvalidArgument, q.Get(nodeapi.DataChunkIndex)))
		return
	}
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodPut {
		s.methodNotAllowed(rq, "GET, PUT")
		return
	}
	ds, err := s.dataScope(ns)
	if err != nil {
		s.fail(rq, err)
		return
	}
	ctx, d := rq.r.Context(), ds.Driver()
	switch rq.r.Method {
	case http.MethodGet:
		b, err := d.GetChunk(ctx, version, i)
		if err != nil {
			s.fail(rq, err)
			return
		}
		h := rq.w.Header()
		h.Set("Content-Type", nodeapi.ValueMIMEType)
		h.Set("Content-Length", strconv.Itoa(len(b)))
		rq.status, rq.outcome = http.StatusOK, "ok"
		rq.w.WriteHeader(http.StatusOK)
		rq.w.Write(b)
	case http.MethodPut:
		b, err := readBody(rq, datastore.ChunkSize)
		if err != nil {
			s.fail(rq, err)
			return
		}
		release, err := s.admitWrite()
		if err != nil {
			s.fail(rq, err)
			return
		}
		defer release()
		if err := liveIntent(ctx, d, version, q.Get(nodeapi.DataChunkStarted)); err != nil {
			s.fail(rq, err)
			return
		}
		if err := d.PutChunk(ctx, version, i, b); err != nil {
			s.fail(rq, err)
			return
		}
		s.noContent(rq)
	}
}

// liveIntent refuses a client's chunk unless its upload intent is live, on
// a backend that keys intents by their start time (the node is the trust
// boundary: a chunk without an intent would never be reclaimed). bolt's
// PutChunk checks the intent itself.
func liveIntent(ctx context.Context, d datastore.Driver, version, started string) error {
	ic, ok := d.(datastore.IntentChecker)
	if !ok {
		return nil
	}
	if started == "" {
		return fmt.Errorf("%w: chunk of version %s without %q, when its upload intent began: begin the upload (POST %s) and name its start", metastore.ErrInvalidArgument, version, nodeapi.DataChunkStarted, nodeapi.DataPrefix+nodeapi.DataUpload)
	}
	t, err := time.Parse(time.RFC3339Nano, started)
	if err != nil {
		return fmt.Errorf("%w: %s %q: want an RFC 3339 time", metastore.ErrInvalidArgument, nodeapi.DataChunkStarted, started)
	}
	live, err := ic.HasIntent(ctx, version, t)
	if err != nil {
		return err
	}
	if !live {
		return fmt.Errorf("%w: chunk of version %s has no live upload intent begun at %s (never begun, committed or reclaimed)", datastore.ErrUploadExpired, version, started)
	}
	return nil
}

func nonNilInfos(in []datastore.Info) []datastore.Info {
	if in == nil {
		return []datastore.Info{}
	}
	return in
}

package server

import (
	"fmt"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

// dataCheck runs lake data check (nodeapi.DataCheck) on the node's own
// driver in namespace ns and answers its report. The node is the trust
// boundary: a repair changes the namespace's structures, so it must come
// with the fence of the namespace's lock (which the driver checks against
// the lock's record before it writes) and passes write admission like any
// other write; a check without repair only reads.
func (s *Server) dataCheck(rq *request, ns string, body []byte) (any, error) {
	var req nodeapi.DataCheckRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	switch {
	case req.Repair && req.Fence == nil:
		return nil, fmt.Errorf("%w: a repair through a node needs the fence of the namespace's lock (lake data check --repair takes it)", metastore.ErrInvalidArgument)
	case !req.Repair && req.Fence != nil:
		return nil, fmt.Errorf("%w: a fence goes with a repair only", metastore.ErrInvalidArgument)
	case req.Fence != nil:
		if err := metastore.ValidateKey(req.Fence.Key); err != nil {
			return nil, fmt.Errorf("fence: %w", err)
		}
		if len(req.Fence.Token) == 0 {
			return nil, fmt.Errorf("%w: fence of %q without a token", metastore.ErrInvalidArgument, req.Fence.Key)
		}
	}
	ds, err := s.dataScope(ns)
	if err != nil {
		return nil, err
	}
	if req.Repair {
		release, err := s.admitWrite()
		if err != nil {
			return nil, err
		}
		defer release()
	}
	rep, err := ds.Check(rq.r.Context(), datastore.CheckOptions{Repair: req.Repair, Chunks: req.Chunks, Fence: req.Fence, Now: req.Now})
	if err != nil {
		return nil, err
	}
	if rep.Problems == nil {
		rep.Problems = []datastore.Problem{}
	}
	return rep, nil
}

package server

import (
	"encoding/base64"
	"errors"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

func (s *Server) handleGuarded(rq *request) {
	if err := s.admission.Check(); err != nil {
		s.fail(rq, err)
		return
	}
	body, err := readBody(rq, GuardedBodyLimit)
	if err != nil {
		s.fail(rq, err)
		return
	}
	var req nodeapi.GuardedRequest
	if err := decodeJSON(body, &req); err != nil {
		s.fail(rq, err)
		return
	}
	guard, target, err := guardedArgs(req)
	if err != nil {
		s.fail(rq, err)
		return
	}
	release, err := s.admission.Admit()
	if err != nil {
		s.fail(rq, err)
		return
	}
	defer release()
	if err := s.store.GuardedMutate(rq.r.Context(), guard, target); err != nil {
		s.fail(rq, err)
		return
	}
	s.noContent(rq)
}

// guardedArgs turns the JSON request into the store's arguments, refusing
// shapes that are ambiguous on the wire (the store refuses the rest).
func guardedArgs(req nodeapi.GuardedRequest) (metastore.Guard, metastore.Mutation, error) {
	var g metastore.Guard
	var m metastore.Mutation
	bad := func(format string, args ...any) (metastore.Guard, metastore.Mutation, error) {
		return g, m, fmt.Errorf("%w: guarded-mutate: "+format, append([]any{metastore.ErrInvalidArgument}, args...)...)
	}
	if req.Guard.Value == nil {
		return bad("guard.value is required (base64; \"\" for an empty value)")
	}
	gv, err := decodeB64(*req.Guard.Value)
	if err != nil {
		return bad("guard.value: %v", err)
	}
	g = metastore.Guard{Key: req.Guard.Key, Value: gv}
	t := req.Target
	m = metastore.Mutation{Key: t.Key, Delete: t.Delete}
	switch {
	case t.ExpectAbsent && t.Expect != nil:
		return bad("give target.expect or target.expect_absent, not both")
	case t.ExpectAbsent:
		m.Expect = metastore.ExpectAbsent()
	case t.Expect != nil:
		ev, err := decodeB64(*t.Expect)
		if err != nil {
			return bad("target.expect: %v", err)
		}
		m.Expect = metastore.ExpectValue(ev)
	default:
		return bad("target needs expect (base64) or expect_absent: true")
	}
	switch {
	case t.Delete && t.Value != nil:
		return bad("a delete takes no target.value")
	case !t.Delete && t.Value == nil:
		return bad("target.value is required unless target.delete is true")
	case !t.Delete:
		v, err := decodeB64(*t.Value)
		if err != nil {
			return bad("target.value: %v", err)
		}
		m.Value = v
	}
	return g, m, nil
}

func decodeB64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, errors.New("not standard padded base64")
	}
	return b, nil
}

// decodeJSON decodes exactly one JSON object strictly, so that every
// reader of the body (the node, a proxy, an audit log) sees the same
// request: invalid UTF-8 (raw or as an unpaired surrogate escape),
// duplicate names, names in another case, unknown names and trailing data
// are refused rather than repaired, merged or ignored. The decoder is
// github.com/go-json-experiment/json (encoding/json v2), whose defaults
// are exactly that.
func decodeJSON(body []byte, v any) error {
	if err := jsonv2.Unmarshal(body, v, jsonv2.RejectUnknownMembers(true)); err != nil {
		return fmt.Errorf("%w: JSON body: %v", metastore.ErrInvalidArgument, err)
	}
	return nil
}

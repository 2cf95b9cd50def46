package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/nodeapi"
)

func (s *Server) handlePause(rq *request) {
	body, err := readBody(rq, smallBodyLimit)
	if err != nil {
		s.fail(rq, err)
		return
	}
	var req nodeapi.PauseRequest
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeJSON(body, &req); err != nil {
			s.fail(rq, err)
			return
		}
	}
	s.admission.Pause(req.Reason)
	ctx, cancel := context.WithTimeout(rq.r.Context(), PauseDrainTimeout)
	defer cancel()
	drainErr := s.admission.WaitIdle(ctx)
	paused, reason := s.admission.State()
	s.log.Warn("write admission paused", "reason", reason, "drained", drainErr == nil, "remote", rq.r.RemoteAddr)
	s.json(rq, http.StatusOK, nodeapi.AdmissionResponse{Paused: paused, Reason: reason, Drained: drainErr == nil})
}

func (s *Server) handleResume(rq *request) {
	s.admission.Resume()
	paused, reason := s.admission.State()
	s.log.Warn("write admission resumed by an operator", "still_paused", paused, "reason", reason, "remote", rq.r.RemoteAddr)
	s.json(rq, http.StatusOK, nodeapi.AdmissionResponse{Paused: paused, Reason: reason})
}

func (s *Server) handleReady(rq *request) {
	if err := s.readiness(); err != nil {
		s.fail(rq, httpErr(http.StatusServiceUnavailable, nodeapi.CodeUnavailable, err.Error()))
		return
	}
	s.text(rq, http.StatusOK, "ready\n")
}

// readiness says why the node is not ready, or nil: the store has not
// answered a read yet, or it has stopped for good (a damaged bolt file).
func (s *Server) readiness() error {
	if !s.ready.Load() {
		return errors.New("lake: backend unavailable: the store has not answered a read yet")
	}
	if h, ok := s.store.Driver().(metastore.Health); ok {
		if err := h.Health(); err != nil {
			return fmt.Errorf("lake: backend unavailable: the store stopped serving: %w", err)
		}
	}
	return nil
}

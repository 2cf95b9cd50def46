package server

import (
	"bytes"
	"context"
	"net/http"

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
	if !s.ready.Load() {
		s.fail(rq, httpErr(http.StatusServiceUnavailable, nodeapi.CodeUnavailable, "lake: backend unavailable: the store has not answered a read yet"))
		return
	}
	s.text(rq, http.StatusOK, "ready\n")
}

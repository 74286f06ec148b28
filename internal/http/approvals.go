package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/countbot/toolsvc/internal/approval"
	"github.com/countbot/toolsvc/internal/callinfo"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// maxDecisionBytes bounds the body of POST /approvals/{id}.
const maxDecisionBytes = 16 << 10

// approvalRoutes adds the approvals' doors behind the keys: GET
// /approvals/{id} (one, for the key whose call it holds or an approver)
// and POST /approvals/{id} (a decision). GET /approvals (the pending
// ones, for approvers; a page for a browser) is added outside the keys
// by approvalPageRoutes, which checks the key itself for the list.
func (s *server) approvalRoutes(r chi.Router) {
	r.Get("/approvals/{id}", s.getApproval)
	r.Post("/approvals/{id}", s.decideApproval)
}

// approvalList is the body of GET /approvals.
type approvalList struct {
	Approvals []approval.Approval `json:"approvals"`
}

// listApprovals answers GET /approvals as JSON, behind the keys; a
// browser's request for the page never reaches it (approvalPageRoutes).
func (s *server) listApprovals(w http.ResponseWriter, r *http.Request) {
	list, err := s.opts.Approvals.Pending(r.Context(), keyFrom(r.Context()))
	if err != nil {
		s.approvalError(w, r, err)
		return
	}
	if list == nil {
		list = []approval.Approval{}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, approvalList{Approvals: list})
}

func (s *server) getApproval(w http.ResponseWriter, r *http.Request) {
	a, err := s.opts.Approvals.Get(r.Context(), keyFrom(r.Context()), chi.URLParam(r, "id"))
	if err != nil {
		s.approvalError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, a)
}

// decisionBody is the body of POST /approvals/{id}.
type decisionBody struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
}

func (s *server) decideApproval(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDecisionBytes))
	if err != nil {
		writeError(w, kindBodyTooLarge, "the decision's body is over 16 KiB")
		return
	}
	var d decisionBody
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		writeError(w, kindBadRequest, `the body must be {"decision": "approve" | "reject", "reason": "..."}: `+err.Error())
		return
	}
	a, err := s.opts.Approvals.Decide(r.Context(), keyFrom(r.Context()), chi.URLParam(r, "id"), d.Decision, runes.Shorten(d.Reason, 2000))
	if err != nil {
		s.approvalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

// approvalError answers an error of the approvals' service.
func (s *server) approvalError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, approval.ErrNotFound):
		writeError(w, kindNotFound, "no such approval for this key")
	case errors.Is(err, approval.ErrNotApprover), errors.Is(err, approval.ErrOwnCall):
		writeError(w, kindForbidden, err.Error())
	case errors.Is(err, approval.ErrDecision):
		writeError(w, kindBadRequest, err.Error())
	case errors.Is(err, approval.ErrDecided):
		writeError(w, kindConflict, "the approval is already decided: GET it to see how")
	case errors.Is(err, approval.ErrExpired):
		writeError(w, kindConflict, "the approval has expired; the call must be sent again to ask anew")
	default:
		s.opts.Log.Error().Err(err).Str("request_id", requestIDFrom(r.Context())).Msg("approvals")
		writeError(w, kindUnavailable, "the approvals cannot be read right now; the request ID is in the X-Request-ID header")
	}
}

// approvalHeartbeat is how often a stream waiting for a decision sends a
// comment, so that proxies and clients see it alive.
const approvalHeartbeat = 15 * time.Second

// awaitApproval is a streamed call that was held: the stream gets the
// held result as an "approval_required" event, then waits, holding no
// slot, until the approval is decided or expires (or the client goes, or
// the service stops); then the call is sent again with its approval, in a
// slot of its own, and its result is the stream's. A rejection or an
// expiry comes back from that second call as the tool error the registry
// gives it, recorded like any call.
func (s *server) awaitApproval(r *http.Request, es *eventStream, t registry.Target, body []byte, facts callinfo.Facts, held registry.Result) registry.Result {
	es.event("approval_required", held.AppendJSON(nil))
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.opts.Stopping, cancel)
	defer stop()
	beat := time.NewTicker(approvalHeartbeat)
	defer beat.Stop()
	decided := make(chan error, 1)
	go func() {
		_, err := s.opts.Approvals.Wait(ctx, held.ApprovalID)
		decided <- err
	}()
	for {
		select {
		case <-beat.C:
			es.comment("waiting for approval " + held.ApprovalID)
			continue
		case err := <-decided:
			if err != nil {
				return held
			}
		}
		break
	}
	p, err := s.gate.admit(r.Context(), t.Timeout())
	if err != nil {
		res := registry.Failed(t.Name(), toolerr.ToolError, "the call's approval was decided, but the service could not run it now ("+err.Error()+"). Next: send the call again with the header X-Approval: "+held.ApprovalID+".")
		res.CallID = held.CallID
		return res
	}
	defer p.done()
	facts.Approval = held.ApprovalID
	a, refused, ok := s.opts.Registry.Admit(t, facts)
	if !ok {
		return refused
	}
	return s.opts.Registry.InvokeAdmitted(registry.WithProgress(p.ctx, es.progress), a, body)
}

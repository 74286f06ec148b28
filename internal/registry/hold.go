package registry

import (
	"context"
	"time"

	"github.com/countbot/toolsvc/internal/audit"
)

// StatusApprovalRequired is the status of a call held for a person's
// approval: it has not run.
const StatusApprovalRequired = "approval_required"

// Holder decides which calls wait for a person before they run
// (approval.Service). It is asked for every call whose arguments passed
// the checks, just before the tool runs, and must be cheap for the calls
// no rule holds.
type Holder interface {
	Hold(ctx context.Context, c HoldCall) HoldOutcome
}

// HoldCall is what a Holder is asked about.
type HoldCall struct {
	CallID string
	Tool   string
	// Impl is the tool itself, for what it says of its calls (a rule of
	// its own, a summary).
	Impl Tool
	// Facts are the call's, with the approval it presents, if any
	// (Facts.Approval).
	Facts Meta
	// Destructive is the tool's destructive hint.
	Destructive bool
	// Args are the checked arguments, as the tool gets them.
	Args []byte
}

// HoldOutcome is a Holder's answer: run the call (with the approval it
// runs under, for the audit record), hold it, or refuse it with a tool
// error.
type HoldOutcome struct {
	Run bool
	// Approval is what the audit record says of the approval.
	Approval *audit.Approval
	// Held, when set, holds the call: its result says what to wait for.
	Held *Hold
	// Code and Message refuse the call (neither Run nor Held): an
	// approval that was rejected, expired, used or given for other
	// arguments.
	Code, Message string
}

// Hold is a call waiting for a person: what its result carries.
type Hold struct {
	ID              string
	ArgumentsSHA256 string
	Summary         string
	ExpiresAt       time.Time
	// Message is the result's text, for the model.
	Message string
}

type holderBox struct{ h Holder }

// SetHolder sets the Holder asked before each call runs (nil: none, every
// call runs). Set it before calls come; it may be replaced at any time.
func (r *Registry) SetHolder(h Holder) {
	if h == nil {
		r.holder.Store(nil)
		return
	}
	r.holder.Store(&holderBox{h})
}

// hold asks the Holder about the call of e, and returns the result of a
// call that must not run now (ok false), or the approval the call runs
// under (nil for most calls).
func (r *Registry) hold(ctx context.Context, e *entry, call Call, args []byte) (res Result, ap *audit.Approval, ok bool) {
	box := r.holder.Load()
	if box == nil {
		return Result{}, nil, true
	}
	out := box.h.Hold(ctx, HoldCall{CallID: call.ID, Tool: call.Tool, Impl: e.tool, Facts: call.Facts,
		Destructive: e.def.Annotations.Destructive, Args: args})
	switch {
	case out.Held != nil:
		h := out.Held
		exp := h.ExpiresAt.UTC()
		res = Result{CallID: call.ID, Tool: call.Tool, Status: StatusApprovalRequired, Result: r.opts.Redact(h.Message),
			ApprovalID: h.ID, ArgumentsSHA256: h.ArgumentsSHA256, Summary: r.opts.Redact(h.Summary), ExpiresAt: &exp}
	case !out.Run:
		res = Failed(call.Tool, out.Code, r.opts.Redact(out.Message))
		res.CallID = call.ID
	default:
		return Result{}, out.Approval, true
	}
	res.approval = out.Approval
	return res, nil, false
}

// RecordApproval writes an audit record of an approval's event that is
// no call of its own (a decision, an expiry): a record of its own, with a
// new call ID, the held call's tool and facts, the status given and the
// approval. Without an audit log it does nothing; a record it cannot
// write is logged.
func (r *Registry) RecordApproval(tool string, meta Meta, status string, ap audit.Approval) {
	if r.opts.Audit == nil {
		return
	}
	id := r.opts.NewID()
	rec := audit.Record{CallID: id, ToolName: tool, Facts: meta.Clean(r.opts.Redact), Timestamp: r.opts.Now().UTC(), Approval: &ap}
	started, err := r.opts.Audit.Start(rec)
	if err == nil {
		rec.Status = status
		err = r.opts.Audit.Finish(started, rec)
	}
	if err != nil {
		r.opts.Log.Error().Err(err).Str("call_id", id).Str("tool", tool).Str("approval_id", ap.ID).
			Msg("audit log cannot record an approval's event")
	}
}

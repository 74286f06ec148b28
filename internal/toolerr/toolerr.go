// Package toolerr is the one vocabulary of errors a model can act on: an
// Error carries a code, which callers switch on, and a message written for
// the model, which says what went wrong and what to do next. Every package
// that fails a tool call (the registry, the tools and their subsystems)
// returns these, so a code is spelled in one place only, here, and
// api/openapi.yaml lists the same codes (a test compares them).
//
// Messages carry no "Error: " prefix: the registry adds it once, when it
// renders a failed call's result text.
package toolerr

import (
	"errors"
	"fmt"
)

// The codes of a failed call's error.
const (
	// UnknownTool: no tool of that name is registered.
	UnknownTool = "unknown_tool"
	// MalformedArguments: the arguments are not one JSON object.
	MalformedArguments = "malformed_arguments"
	// InvalidArguments: the arguments break the tool's schema or rules.
	InvalidArguments = "invalid_arguments"
	// ToolError: the tool ran and failed; also any error without a code.
	ToolError = "tool_error"
	// NotFound: a file, text or page named by the call does not exist.
	NotFound = "not_found"
	// PathDenied: a path leads outside the workspace or may not be used.
	PathDenied = "path_denied"
	// PolicyDenied: a guard (command, network, skill) refused the call.
	PolicyDenied = "policy_denied"
	// Timeout: the call did not finish in its time and was stopped.
	Timeout = "timeout"
	// Canceled: the call was stopped before it finished (the client went
	// away or the service is shutting down).
	Canceled = "canceled"
	// Busy: too many calls of the kind are running; retry later.
	Busy = "busy"
	// Unavailable: something the tool needs is gone or unreachable.
	Unavailable = "unavailable"
	// AuditUnavailable: the audit log could not note the call's start, so
	// the tool was not run.
	AuditUnavailable = "audit_unavailable"
	// AuditFailed: the tool ran but its final audit record could not be
	// written; the result carries the tool's output after the message.
	AuditFailed = "audit_failed"
	// DuplicateCall: a sub-agent repeated its previous call exactly, and
	// was answered without running it. Only the agent loop uses it; a call
	// through the registry never ends with it.
	DuplicateCall = "duplicate_call"
	// RateLimited: the caller's key is over its rate or its calls at once
	// (TOOLSVC_POLICY_FILE); the call did not run. The message says how
	// long to wait.
	RateLimited = "rate_limited"
	// ApprovalInvalid: the call presented an approval that does not fit
	// it (another key's, for other arguments, already used, unknown); it
	// did not run.
	ApprovalInvalid = "approval_invalid"
	// ApprovalRejected: a person rejected the call; the message carries
	// their reason.
	ApprovalRejected = "approval_rejected"
	// ApprovalExpired: the call's approval lapsed before it was decided or
	// used; sending the call again asks anew.
	ApprovalExpired = "approval_expired"
)

// codes is every code above, in the order api/openapi.yaml lists them.
var codes = [...]string{
	UnknownTool, MalformedArguments, InvalidArguments, ToolError, NotFound,
	PathDenied, PolicyDenied, Timeout, Canceled, Busy, Unavailable,
	AuditUnavailable, AuditFailed, DuplicateCall, RateLimited,
	ApprovalInvalid, ApprovalRejected, ApprovalExpired,
}

// Codes returns every error code, as a new slice.
func Codes() []string { return append([]string(nil), codes[:]...) }

// Error is an error a model can act on.
type Error struct {
	// Code is one of the codes above.
	Code string
	// Message says, for a model, what went wrong and what to do next.
	// It is the whole of Error(), with no "Error: " prefix.
	Message string
	// Err is the underlying error, if any, for errors.Is and errors.As
	// and for the log; the model sees only Message.
	Err error
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and a message formatted as
// fmt.Errorf does it: an argument given with %w becomes the underlying
// error.
func Errorf(code, format string, args ...any) error {
	w := fmt.Errorf(format, args...)
	e := &Error{Code: code, Message: w.Error()}
	switch u := w.(type) {
	case interface{ Unwrap() error }:
		e.Err = u.Unwrap()
	case interface{ Unwrap() []error }:
		e.Err = errors.Join(u.Unwrap()...)
	}
	return e
}

// ErrorCode returns the code of the first *Error in err's chain, ToolError
// for an error without one, and "" for nil.
func ErrorCode(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Code
	}
	return ToolError
}

// ErrorMessage returns the message of the first *Error in err's chain, the
// text of an error without one, and "" for nil.
func ErrorMessage(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Message
	}
	return err.Error()
}

package registry

import (
	"errors"
	"fmt"
)

// Error codes carried by a failed call's result. Callers may switch on them;
// the message beside them is written for a model.
const (
	CodeUnknownTool        = "unknown_tool"
	CodeMalformedArguments = "malformed_arguments"
	CodeInvalidArguments   = "invalid_arguments"
	CodeToolError          = "tool_error"
	CodeNotFound           = "not_found"
	CodePathDenied         = "path_denied"
	CodePolicyDenied       = "policy_denied"
	CodeTimeout            = "timeout"
	CodeCanceled           = "canceled"
	CodeBusy               = "busy"
	CodeUnavailable        = "unavailable"
	CodeInternal           = "internal_error"
	// CodeAuditUnavailable: the audit log could not note the call's
	// start, so the tool was not run.
	CodeAuditUnavailable = "audit_unavailable"
	// CodeAuditFailed: the tool ran but its final audit record could not
	// be written; the result carries the tool's output after the message.
	CodeAuditFailed = "audit_failed"
)

// Coded is implemented by errors that carry their own error code. Packages
// below the registry (workspace, netguard, ...) implement it without
// importing the registry, and Invoke reports their code and message as is.
type Coded interface {
	error
	ErrorCode() string
}

// Error is an error a model can act on: a code and a message that says what
// went wrong and what to do next.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string     { return e.Message }
func (e *Error) ErrorCode() string { return e.Code }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of err if it, or an error it wraps, carries one.
func CodeOf(err error) (string, bool) {
	var c Coded
	if errors.As(err, &c) {
		return c.ErrorCode(), true
	}
	return "", false
}

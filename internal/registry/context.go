package registry

import (
	"context"
	"sync/atomic"

	"github.com/countbot/toolsvc/internal/callinfo"
)

// Call describes the call a tool is running in. Tools read it with CallFrom.
type Call struct {
	ID   string // UUID v4 of this call
	Tool string
	// Facts are what the caller gave with the call (the key's name, the
	// session, the chat, the request and trace IDs), redacted, as they
	// are: Call.SessionID, Call.Key and the others are the Facts' fields.
	callinfo.Facts
}

// Meta is what the caller of Invoke knows about a call: its facts, the
// one type the gate builds, the tool's Call holds and the audit record
// holds. A caller that wants the tool's progress events gives a listener
// with WithProgress on the call's context.
type Meta = callinfo.Facts

type callKey struct{}
type progressKey struct{}

// callState is what a call's context carries: the call, and what its
// tool reports of it besides its text (one context value for both).
type callState struct {
	call Call
	outcome
	// ended is set once the tool has returned: progress events sent
	// later are dropped.
	ended atomic.Bool
}

// callCtx is a call's context holding its state: one allocation for both,
// where context.WithValue would take one of its own.
type callCtx struct {
	context.Context
	cs callState
}

// Value returns the call's state for callKey, as a context.WithValue
// would.
func (c *callCtx) Value(key any) any {
	if _, ok := key.(callKey); ok {
		return &c.cs
	}
	return c.Context.Value(key)
}

// CallFrom returns the call ctx belongs to, and false outside Invoke.
func CallFrom(ctx context.Context) (Call, bool) {
	if cs, ok := ctx.Value(callKey{}).(*callState); ok {
		return cs.call, true
	}
	return Call{}, false
}

// WithCall returns ctx carrying c. Invoke does this; tests of a single tool
// may use it too.
func WithCall(ctx context.Context, c Call) context.Context {
	ctx, _ = withCall(ctx, c)
	return ctx
}

// withCall returns ctx carrying c, and the state it carries.
func withCall(ctx context.Context, c Call) (context.Context, *callState) {
	cc := &callCtx{Context: ctx, cs: callState{call: c}}
	return cc, &cc.cs
}

// WithProgress returns ctx whose Progress calls reach fn. Given to
// Invoke, fn is the call's listener: the tool's events reach it redacted,
// and none after the tool has returned.
func WithProgress(ctx context.Context, fn func(event, data string)) context.Context {
	if fn == nil {
		return ctx
	}
	return context.WithValue(ctx, progressKey{}, fn)
}

// Progress reports a progress event for the running call. It does nothing
// when nobody listens, so tools may call it unconditionally.
func Progress(ctx context.Context, event, data string) {
	if fn, ok := ctx.Value(progressKey{}).(func(event, data string)); ok {
		fn(event, data)
	}
}

// Streaming reports whether anyone listens to Progress for ctx, so a tool can
// skip the work of preparing progress events nobody reads.
func Streaming(ctx context.Context) bool {
	_, ok := ctx.Value(progressKey{}).(func(event, data string))
	return ok
}

// outcome holds what a tool reports of its call besides its text.
type outcome struct {
	exitCode atomic.Pointer[int]
}

// ReportExitCode records the exit status of the command the running call
// ran, for the Result's exit_code. It does nothing outside Invoke.
func ReportExitCode(ctx context.Context, code int) {
	if cs, ok := ctx.Value(callKey{}).(*callState); ok {
		cs.exitCode.Store(&code)
	}
}

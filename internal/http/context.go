package http

import (
	"context"
	"net/http"

	"github.com/countbot/toolsvc/internal/callinfo"
)

// requestState is what the middleware learn about a request, kept in one
// value of its context that each of them fills in, instead of a context
// value and a copy of the request per middleware: the request ID, the
// caller the gate authenticated (whose key name the access log line,
// written outside every other middleware, shows) and the call's facts the
// door read. Each field is written once, before the handlers below
// the middleware that writes it run.
type requestState struct {
	id     string
	caller Caller
	// hasCaller: the request passed the gate's authentication.
	hasCaller bool
	facts     callinfo.Facts
	// hasFacts: the request passed a door of the gate.
	hasFacts bool
}

type stateKey struct{}

// stateFrom returns the request state in ctx, or nil.
func stateFrom(ctx context.Context) *requestState {
	st, _ := ctx.Value(stateKey{}).(*requestState)
	return st
}

// stateCtx is a request's context holding its state: one allocation for
// both, where context.WithValue would take one of its own.
type stateCtx struct {
	context.Context
	st requestState
}

// Value returns the state for stateKey, as a context.WithValue would.
func (c *stateCtx) Value(key any) any {
	if _, ok := key.(stateKey); ok {
		return &c.st
	}
	return c.Context.Value(key)
}

// withState returns r with a request state in its context, and the state;
// a request that has one keeps it.
func withState(r *http.Request) (*http.Request, *requestState) {
	if st := stateFrom(r.Context()); st != nil {
		return r, st
	}
	c := &stateCtx{Context: r.Context()}
	return r.WithContext(c), &c.st
}

// keyFrom returns the name of the key the gate authenticated for ctx's
// request: what the key policy decides by. Empty without keys.
func keyFrom(ctx context.Context) string {
	if st := stateFrom(ctx); st != nil {
		return st.caller.Key
	}
	return ""
}

func requestIDFrom(ctx context.Context) string {
	if st := stateFrom(ctx); st != nil {
		return st.id
	}
	return ""
}

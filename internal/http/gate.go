package http

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/countbot/toolsvc/internal/callinfo"
)

// Key is one API key the service accepts: its name (what logs, audit
// records and owners of work show), the key itself, and whether it is an
// admin key, which sees every key's work.
type Key struct {
	Name   string
	Secret string
	Admin  bool
}

// Caller is who a request comes from, as the gate's authentication found.
type Caller struct {
	// Key is the name of the request's API key; empty when the service
	// has no keys.
	Key string
	// All is set for an admin key, and for every request when the service
	// has no keys: such a caller sees every key's work.
	All bool
}

// Sees reports whether the caller may see, follow or cancel work that
// belongs to owner, the name of the key that started it. Work started
// without keys has no owner: once keys are configured only admin keys see
// it, since nothing says which key it should go to.
func (c Caller) Sees(owner string) bool { return c.All || owner == c.Key }

// CallerFrom returns the caller the gate authenticated for ctx's request;
// false outside the routes behind the gate.
func CallerFrom(ctx context.Context) (Caller, bool) {
	if st := stateFrom(ctx); st != nil && st.hasCaller {
		return st.caller, true
	}
	return Caller{}, false
}

// gate is the one way in for every door to the tools (REST invoke, /mcp,
// and any later one), so that each check is written once:
//
//   - authenticate (middleware, on every route but the health probes):
//     the bearer key, compared in constant time, becomes a Caller in the
//     request's context and its name goes to the access log line;
//   - door (middleware, on the routes that run calls): the call's facts
//     (callinfo.Facts: the key's name and the headers of callHeaders,
//     cleaned) are read once into the request's context;
//   - admit (in the door's handler, once the call is about to run): refused
//     while the service shuts down or when every slot is taken; otherwise
//     the call holds a slot, runs on a context the shutdown cancels, and
//     gets the facts the door read.
type gate struct {
	keys     []keyEntry
	headers  []callHeader
	stopping context.Context
	sem      chan struct{}

	// running holds the calls let through and not done yet, which the
	// shutdown cancels (halt); halted is set once it has. One watch of
	// stopping for the gate costs less than one per call.
	mu      sync.Mutex
	running map[*pass]struct{}
	halted  bool
}

// callHeader is one request header the gate reads into a call's facts.
type callHeader struct {
	// name is the header as api/openapi.yaml documents it and CORS allows
	// it ("X-Session-ID"); key is how net/http stores it ("X-Session-Id").
	name, key string
	// read returns the header's value, made safe to record (headerValue
	// unless the header needs its own); set puts it in its fact.
	read func(r *http.Request, key string) string
	set  func(f *callinfo.Facts, v string)
}

// callHeaders are the headers the gate reads into a call's facts, in the
// order CORS lists them. A new fact from a header is a row here, a field
// of callinfo.Facts and a parameter in api/openapi.yaml, nothing else:
// CORS allows what this list holds, the registry and the audit log take
// the facts as they are, and tests hold the list, the facts, the contract
// and the audit record together.
func callHeaders() []callHeader {
	return []callHeader{
		{name: "X-Session-ID", read: headerValue, set: func(f *callinfo.Facts, v string) { f.SessionID = v }},
		{name: "X-Source", read: headerValue, set: func(f *callinfo.Facts, v string) { f.Source = v }},
		{name: "X-Channel", read: headerValue, set: func(f *callinfo.Facts, v string) { f.Channel = v }},
		{name: "X-Chat-ID", read: headerValue, set: func(f *callinfo.Facts, v string) { f.ChatID = v }},
		{name: "X-Reply-To", read: headerValue, set: func(f *callinfo.Facts, v string) { f.ReplyTo = v }},
		// The request ID middleware has read this one already, on every
		// route: the call's is the ID it took (the client's, when sane) or
		// made, the one the answer and the access log carry.
		{name: "X-Request-ID", read: func(r *http.Request, _ string) string { return requestIDFrom(r.Context()) },
			set: func(f *callinfo.Facts, v string) { f.RequestID = v }},
		{name: "traceparent", read: traceID, set: func(f *callinfo.Facts, v string) { f.TraceID = v }},
		// The approval a held call is sent again with.
		{name: "X-Approval", read: headerValue, set: func(f *callinfo.Facts, v string) { f.Approval = v }},
	}
}

// keyEntry is a key as the gate keeps it: hashed, so that neither the
// comparison nor its length reveals anything.
type keyEntry struct {
	hash  [32]byte
	name  string
	admin bool
}

func newGate(keys []Key, stopping context.Context, maxConcurrent int) *gate {
	g := &gate{headers: callHeaders(), stopping: stopping, sem: make(chan struct{}, maxConcurrent), running: map[*pass]struct{}{}}
	for i := range g.headers {
		g.headers[i].key = http.CanonicalHeaderKey(g.headers[i].name)
	}
	context.AfterFunc(stopping, g.halt)
	for _, k := range keys {
		g.keys = append(g.keys, keyEntry{hash: sha256.Sum256([]byte(k.Secret)), name: k.Name, admin: k.Admin})
	}
	return g
}

// lookup returns the caller a presented key stands for. Every key is
// compared, whichever matches, so the time taken says nothing about which.
func (g *gate) lookup(presented string) (Caller, bool) {
	h := sha256.Sum256([]byte(presented))
	match := -1
	for i := range g.keys {
		match = subtle.ConstantTimeSelect(subtle.ConstantTimeCompare(h[:], g.keys[i].hash[:]), i, match)
	}
	if match < 0 {
		return Caller{}, false
	}
	return Caller{Key: g.keys[match].name, All: g.keys[match].admin}, true
}

// authenticate requires "Authorization: Bearer <key>" when keys are
// configured, and puts the Caller in the request's context either way.
func (g *gate) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := Caller{All: true}
		if len(g.keys) > 0 {
			scheme, key, found := strings.Cut(header(r.Header, "Authorization"), " ")
			var ok bool
			if found && strings.EqualFold(scheme, "Bearer") {
				c, ok = g.lookup(strings.TrimSpace(key))
			}
			if !ok {
				writeError(w, kindUnauthorized, "a valid API key is required: send 'Authorization: Bearer <key>'")
				return
			}
		}
		r, st := withState(r)
		st.caller, st.hasCaller = c, true
		next.ServeHTTP(w, r)
	})
}

// door reads a call's facts into the request's context, once, for
// whichever door runs it: the name of the caller's key and the headers of
// callHeaders.
func (g *gate) door(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, st := withState(r)
		// Filled in place: the request's state is on the heap already, a
		// Facts of its own would be too (set takes its address).
		st.facts = callinfo.Facts{Key: st.caller.Key}
		for i := range g.headers {
			h := &g.headers[i]
			if v := h.read(r, h.key); v != "" {
				h.set(&st.facts, v)
			}
		}
		st.hasFacts = true
		next.ServeHTTP(w, r)
	})
}

// Why admit refuses a call.
var (
	errStopping = errors.New("the service is shutting down")
	errBusy     = errors.New("every call slot is taken")
	errNoDoor   = errors.New("the call did not come through a door of the gate")
)

// stopped reports whether the service is shutting down, for a door that
// can refuse before reading a body.
func (g *gate) stopped() bool { return g.stopping.Err() != nil }

// pass is a call let through the gate.
type pass struct {
	// ctx is the call's context: canceled when the service stops, or when
	// the call is done.
	ctx context.Context
	// facts are what the door read, for registry.Invoke: the request's
	// own, which outlives the call.
	facts *callinfo.Facts
	// cancel cancels ctx (a client that went away) and keeps the slot:
	// the call holds it until the tool has returned and done is called.
	cancel context.CancelFunc
	gate   *gate
	ended  atomic.Bool
}

// done ends the call: it cancels ctx and gives the slot back. It may be
// called more than once.
func (p *pass) done() {
	if p.ended.Swap(true) {
		return
	}
	g := p.gate
	g.mu.Lock()
	delete(g.running, p)
	g.mu.Unlock()
	p.cancel()
	<-g.sem
}

// halt cancels every call running, once the service is stopping.
func (g *gate) halt() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.halted = true
	for p := range g.running {
		p.cancel()
	}
}

// admit lets a call through: ctx must come from a request that passed
// door (a context without what the door read is refused, so that a door
// that forgot it cannot run calls as nobody). The call's context ends
// after timeout (the tool's, registry.Timeout: the registry then adds no
// deadline of its own). The caller must call done.
func (g *gate) admit(ctx context.Context, timeout time.Duration) (*pass, error) {
	st := stateFrom(ctx)
	if st == nil || !st.hasFacts {
		return nil, errNoDoor
	}
	if g.stopped() {
		return nil, errStopping
	}
	select {
	case g.sem <- struct{}{}:
	default:
		return nil, errBusy
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	p := &pass{ctx: ctx, facts: &st.facts, cancel: cancel, gate: g}
	g.mu.Lock()
	if g.halted {
		cancel() // stopping since the check above: the call starts canceled
	} else {
		g.running[p] = struct{}{}
	}
	g.mu.Unlock()
	return p, nil
}

// headerValue returns a header bounded in length and stripped of control
// characters, since it ends up in the audit log.
func headerValue(r *http.Request, name string) string {
	v := header(r.Header, name)
	if len(v) > 256 {
		v = v[:256]
	}
	return strings.Map(func(c rune) rune {
		if unicode.IsControl(c) {
			return -1
		}
		return c
	}, v)
}

// traceID returns the trace ID of a W3C traceparent header
// (version-traceid-parentid-flags, lower-case hex), or "" when the request
// has none, more than one, or one that is not well formed: such a header
// is to be ignored, and a made-up ID would point at nobody's trace. A
// later version may add fields after the flags.
func traceID(r *http.Request, key string) string {
	vs := r.Header[key]
	if len(vs) != 1 {
		return ""
	}
	v := vs[0]
	if len(v) < 55 || len(v) > 55 && (v[:2] == "00" || v[55] != '-') || v[:2] == "ff" ||
		v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return ""
	}
	version, trace, parent, flags := v[:2], v[3:35], v[36:52], v[53:55]
	if !lowerHex(version) || !lowerHex(trace) || !lowerHex(parent) || !lowerHex(flags) ||
		strings.Trim(trace, "0") == "" || strings.Trim(parent, "0") == "" {
		return ""
	}
	return trace
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

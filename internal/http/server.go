// Package http serves the registry over HTTP/JSON: tool definitions, tool
// calls (plain or streamed as server-sent events) and health checks.
package http

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/approval"
	"github.com/countbot/toolsvc/internal/callinfo"
	"github.com/countbot/toolsvc/internal/docspage"
	"github.com/countbot/toolsvc/internal/jsonx"
	"github.com/countbot/toolsvc/internal/mcp"
	"github.com/countbot/toolsvc/internal/medialink"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/toolfmt"
	"github.com/countbot/toolsvc/internal/tracing"
)

// Options configure the handler.
type Options struct {
	Registry *registry.Registry
	// Keys are the API keys; empty: no key needed. Each request's Caller
	// (its key's name, and whether it sees all work) is in its context.
	Keys          []Key
	MaxBodyBytes  int64
	MaxConcurrent int // tool calls at once; more get 503
	// BodyTimeout bounds the time a call's body may take to arrive (408
	// after it). Default 30s.
	BodyTimeout time.Duration
	// StreamWriteTimeout bounds one write to a client: a streamed event or
	// a call's result. A client that reads nothing for that long is
	// dropped and its call canceled. Default 30s.
	StreamWriteTimeout time.Duration
	Log                zerolog.Logger
	// Ready reports whether the service can do its work (workspace and data
	// folder usable), with the outcome of each check by name ("ok" or what
	// is wrong). Nil means always ready.
	Ready func() (ok bool, checks map[string]string)
	// Stopping is done when the service shuts down: running calls are
	// canceled and new ones refused.
	Stopping context.Context
	// Routes, when set, adds routes behind the same authentication (for
	// example GET /skills from the skills package).
	Routes func(r chi.Router)
	// Version is the build's version, reported by GET /healthz.
	Version string
	// Metrics, when set, is served at GET /metrics, behind the keys like
	// every route but the health probes: the tool names, error codes and
	// call rates it shows are for the operator.
	Metrics http.Handler
	// CORSOrigins are the origins a browser may call the API from ("*":
	// any but "null"). A request with another Origin is refused (403).
	// Empty: no CORS headers, and every request a browser sends for a web
	// page is refused.
	CORSOrigins []string
	// AllowedHosts are host names the Host header may name besides
	// localhost and loopback addresses ("*.example.com": any name under
	// it). Empty: the Host is checked only on connections that came in on
	// a loopback address; set: on every connection.
	AllowedHosts []string
	// Media, when set, serves its signed links at GET /media/{token},
	// without a key (the token is the credential) and without the Host
	// check (see guard).
	Media *medialink.Links
	// Approvals, when set, is the hold point's desk: GET and POST
	// /approvals, and the wait of a held call streamed with
	// Accept: text/event-stream.
	Approvals *approval.Service
	// ApprovalSealKey seals what an MCP client carries while its user
	// decides a held call (approval.SealKeyBytes bytes; empty: a random
	// key of this process).
	ApprovalSealKey []byte
	// Tracer, when set, gives each request of POST /tools/{name}/invoke
	// its HTTP server span and each MCP request on /mcp its MCP server
	// span, each the child of the caller's traceparent (the header, or
	// an MCP request's _meta). The registry holds the same Tracer for the
	// calls' own spans. Nil: no spans.
	Tracer *tracing.Tracer
}

// invokeRoute is the route of REST calls, the name of their server spans.
const invokeRoute = "/tools/{name}/invoke"

type server struct {
	opts   Options
	gate   *gate
	health []byte // the body of GET /healthz, the same for the life of the process
	// bodies counts the bytes of request bodies held in memory, arriving or
	// in calls that run; bodyBudget bounds it. Slots no longer bound body
	// memory, since bodies are read before a slot is taken.
	bodies     atomic.Int64
	bodyBudget int64
	// rendered holds GET /tools?format= and GET /openapi.json, rendered
	// once per generation of the registry.
	rendered *renderings
	// resultBufs holds *[]byte buffers that call results are encoded into.
	resultBufs sync.Pool
}

// withDefaults is opts with every bound left at zero given its default.
func withDefaults(opts Options) Options {
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = 64
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 10 << 20
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = 30 * time.Second
	}
	if opts.StreamWriteTimeout <= 0 {
		opts.StreamWriteTimeout = 30 * time.Second
	}
	if opts.Stopping == nil {
		opts.Stopping = context.Background()
	}
	return opts
}

// NewHandler returns the service's HTTP handler.
func NewHandler(opts Options) http.Handler {
	opts = withDefaults(opts)
	s := &server{opts: opts, gate: newGate(opts.Keys, opts.Stopping, opts.MaxConcurrent)}
	// As much body memory as full slots would hold with the largest bodies.
	s.bodyBudget = opts.MaxBodyBytes * int64(opts.MaxConcurrent)
	if s.bodyBudget/int64(opts.MaxConcurrent) != opts.MaxBodyBytes {
		s.bodyBudget = math.MaxInt64
	}
	s.health, _ = jsonx.Marshal(healthBody{Status: "ok", Version: opts.Version}) // two strings: cannot fail

	s.rendered = newRenderings(opts.Registry, opts.Version)
	mcpHandler := mcp.NewHandler(mcp.Options{
		Registry: opts.Registry, Invoke: s.mcpInvoke, Version: opts.Version, MaxBodyBytes: opts.MaxBodyBytes,
		Key: keyFrom, Denied: s.mcpDenied, Approvals: opts.Approvals, SealKey: opts.ApprovalSealKey, Tracer: opts.Tracer,
	})

	r := chi.NewRouter()
	// HEAD is answered on every GET route, by the GET handler; net/http
	// sends its headers and drops its body. The guard refuses pages that
	// are not invited on every route, before anything else answers them.
	// CORS comes before the keys: a browser's preflight carries none.
	r.Use(requestID, accessLog(opts.Log), recoverer(opts.Log),
		newGuard(opts.CORSOrigins, opts.AllowedHosts, opts.Log).handle,
		newCORS(opts.CORSOrigins, corsAllowHeaders(s.gate.headers)).handle, middleware.GetHead)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, kindNotFound, fmt.Sprintf("no route %s %s", runes.Shorten(r.Method, 40), runes.Shorten(r.URL.Path, runes.Echo)))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", allowedMethods(r, req))
		writeError(w, kindMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s", runes.Shorten(req.Method, 40), runes.Shorten(req.URL.Path, runes.Echo)))
	})
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	if opts.Media != nil {
		r.Get(medialink.Route+"{token}", s.media)
	}
	// The index is behind the keys like every door but the probes: which
	// doors answer (sub-agents, metrics) tells how the service is set up.
	// A browser that opens / sends no key, and gets a page that points at
	// /docs instead (front). The index is rendered once the router is
	// complete, before NewHandler returns, so every request sees it.
	var idx *index
	serveIndex := func(w http.ResponseWriter, req *http.Request) { idx.serve(w, req) }
	r.Method(http.MethodGet, "/", newFront(s.gate, opts.Version, serveIndex))
	s.docsRoutes(r, serveIndex)
	if opts.Approvals != nil {
		s.approvalPageRoutes(r)
	}
	r.Group(func(r chi.Router) {
		r.Use(s.gate.authenticate)
		r.Get("/tools", s.listTools)
		r.Get("/tools/{name}", s.getTool)
		r.With(s.gate.door).Post(invokeRoute, opts.Tracer.Middleware(invokeRoute, http.HandlerFunc(s.invoke)).ServeHTTP)
		r.Get("/openapi.json", s.openAPI)
		// MCP's Streamable HTTP transport, stateless: POST carries the
		// JSON-RPC messages. GET and DELETE (a session's stream and its
		// end) get the router's 405 with Allow, since there are no
		// sessions; MCP clients take that as "no stream".
		r.With(s.gate.door).Post("/mcp", s.mcpBody(mcpHandler))
		if opts.Metrics != nil {
			r.Method(http.MethodGet, "/metrics", opts.Metrics)
		}
		if opts.Approvals != nil {
			s.approvalRoutes(r)
		}
		if opts.Routes != nil {
			opts.Routes(r)
		}
	})
	idx = newIndex(r, opts.Version)
	return r
}

// docsRoutes adds GET /docs, the interactive page for a browser, which
// needs no key: a browser cannot send one with a link, the page holds
// nothing but the embedded Swagger UI and the version (which /healthz
// gives too), and everything it shows comes from doors that need the key,
// which the page asks for. Other clients get the index, behind the keys.
func (s *server) docsRoutes(r chi.Router, serveIndex http.HandlerFunc) {
	docs := docspage.New(s.opts.Version, DocsURL)
	authIndex := s.gate.authenticate(serveIndex)
	r.Get("/docs", func(w http.ResponseWriter, req *http.Request) {
		if !wantsHTML(req) {
			authIndex.ServeHTTP(w, req)
			return
		}
		w.Header().Add("Vary", "Accept")
		docs.ServePage(w, req)
	})
	r.Get("/docs/assets/{file}", docs.ServeAsset)
}

// allowedMethods lists the methods routes has for the request's path, as
// the Allow header of a 405 states them; HEAD goes with GET.
func allowedMethods(routes chi.Routes, r *http.Request) string {
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if routes.Match(chi.NewRouteContext(), m, path) {
			allow = append(allow, m)
			if m == http.MethodGet {
				allow = append(allow, http.MethodHead)
			}
		}
	}
	return strings.Join(allow, ", ")
}

func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	writeRaw(w, http.StatusOK, s.health)
}

// healthBody is the body of GET /healthz.
type healthBody struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// listTools serves the definitions in the format the query asks for
// (openai by default).
func (s *server) listTools(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	format, strict := q.Get("format"), q.Get("strict")
	if format == "" {
		format = toolfmt.OpenAI
	}
	if !toolfmt.Known(format) {
		writeError(w, kindBadRequest, fmt.Sprintf("unknown format %q; use one of %s", runes.Shorten(format, 40), strings.Join(toolfmt.Formats(), ", ")))
		return
	}
	switch {
	case strict != "" && strict != "true" && strict != "false":
		writeError(w, kindBadRequest, fmt.Sprintf("strict is true or false, not %q", runes.Shorten(strict, 40)))
		return
	case strict == "true" && !slices.Contains(toolfmt.StrictFormats(), format):
		writeError(w, kindBadRequest, fmt.Sprintf("strict=true applies to the formats %s, not %s", strings.Join(toolfmt.StrictFormats(), " and "), format))
		return
	case strict != "true" && format == toolfmt.OpenAI:
		writeRaw(w, http.StatusOK, s.opts.Registry.DefinitionsJSONFor(keyFrom(r.Context())))
		return
	}
	rd := s.rendered.get(keyFrom(r.Context()))
	if rd.formatErr != nil {
		s.opts.Log.Error().Err(rd.formatErr).Msg("tool definitions")
		writeError(w, kindInternal, "internal error; the request ID is in the X-Request-ID header")
		return
	}
	if strict == "true" {
		writeRaw(w, http.StatusOK, rd.strict[format])
		return
	}
	writeRaw(w, http.StatusOK, rd.formats[format])
}

// openAPI serves the OpenAPI document: the contract plus one operation
// per tool, or (scope=tools) the tools' operations only.
func (s *server) openAPI(w http.ResponseWriter, r *http.Request) {
	rd := s.rendered.get(keyFrom(r.Context()))
	if rd.openapiErr != nil {
		s.opts.Log.Error().Err(rd.openapiErr).Msg("openapi document")
		writeError(w, kindInternal, "internal error; the request ID is in the X-Request-ID header")
		return
	}
	switch r.URL.Query().Get("scope") {
	case "", "all":
		writeRaw(w, http.StatusOK, rd.openapi)
	case "tools":
		writeRaw(w, http.StatusOK, rd.openapiTools)
	default:
		writeError(w, kindBadRequest, fmt.Sprintf("unknown scope %q; use all (the default) or tools", runes.Shorten(r.URL.Query().Get("scope"), 40)))
	}
}

// mcpInvoke runs a call that came over MCP through the gate, as
// POST /tools/{name}/invoke does: refused while shutting down or when every
// slot is taken, canceled when the service stops, with the facts (the
// key's name, the headers of callHeaders) the door read from the MCP
// request.
func (s *server) mcpInvoke(ctx context.Context, t registry.Target, args []byte) (registry.Result, string) {
	p, err := s.gate.admit(ctx, t.Timeout())
	switch {
	case errors.Is(err, errStopping):
		return registry.Result{}, "the service is shutting down. Next: retry in a moment; if it persists, tell the user the tool service is down."
	case errors.Is(err, errBusy):
		return registry.Result{}, fmt.Sprintf("%d tool calls are already running. Next: retry this call in a few seconds.", cap(s.gate.sem))
	case err != nil:
		s.opts.Log.Error().Err(err).Str("tool", t.Name()).Msg("mcp: a call without its door's context was refused")
		return registry.Result{}, "the service could not run the call (an internal fault, in its log). Next: tell the user the tool service needs its operator."
	}
	defer p.done()
	// A refusal of the key policy is a result: a tool the key may not
	// call cannot come here (the MCP handler offers the key none), and a
	// rate_limited result becomes the handler's JSON-RPC error.
	facts := *p.facts
	if id := mcp.PresentedApproval(ctx); id != "" {
		facts.Approval = id // the client's answer to the question about this call
	}
	a, refused, ok := s.opts.Registry.Admit(t, facts)
	if !ok {
		return refused, ""
	}
	return s.opts.Registry.InvokeAdmitted(p.ctx, a, args), ""
}

// mcpDenied records a plain tools/call of a tool the caller's key may
// not call, which the MCP handler then answers as an unknown tool.
func (s *server) mcpDenied(ctx context.Context, t registry.Target) {
	if st := stateFrom(ctx); st != nil && st.hasFacts {
		s.opts.Registry.Admit(t, st.facts)
	}
}

// mcpBody reads an MCP request's body as a call's body is read (size
// limit, body timeout, the memory budget of bodies) before the MCP handler
// sees it, and lifts the server's write timeout: the answer waits for a
// tool call, which has its own deadline.
func (s *server) mcpBody(h *mcp.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, release, ok := s.readBody(w, r)
		defer release()
		if !ok {
			return
		}
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		h.ServeBody(w, r, body)
	}
}

func (s *server) getTool(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	def, ok := s.opts.Registry.DefinitionJSONFor(keyFrom(r.Context()), name)
	if !ok {
		writeError(w, kindUnknownTool, s.opts.Registry.UnknownToolMessageFor(keyFrom(r.Context()), name))
		return
	}
	writeRaw(w, http.StatusOK, def)
}

func (s *server) invoke(w http.ResponseWriter, r *http.Request) {
	// The tool is looked up once: the 404, the call's deadline and the
	// call itself go by what this look-up found.
	// A tool the key may not call is not found either, and answered as
	// one that does not exist; Admit records the refusal.
	t := s.opts.Registry.FindFor(keyFrom(r.Context()), chi.URLParam(r, "name"))
	if t.Denied() {
		if st := stateFrom(r.Context()); st != nil {
			s.opts.Registry.Admit(t, st.facts)
		}
	}
	if !t.Found() {
		writeError(w, kindUnknownTool, s.opts.Registry.UnknownToolMessageFor(keyFrom(r.Context()), t.Name()))
		return
	}
	if s.gate.stopped() {
		writeError(w, kindShuttingDown, "the service is shutting down; retry on another instance")
		return
	}
	// The body is read before a slot is taken: a slot is for running a
	// tool, not for waiting on a slow upload.
	body, release, ok := s.readBody(w, r)
	defer release()
	if !ok {
		return
	}
	// A call stops when its client goes away or when the service stops.
	p, err := s.gate.admit(r.Context(), t.Timeout())
	switch {
	case errors.Is(err, errStopping):
		writeError(w, kindShuttingDown, "the service is shutting down; retry on another instance")
		return
	case errors.Is(err, errBusy):
		writeError(w, kindOverloaded, fmt.Sprintf("%d tool calls are already running; retry shortly", cap(s.gate.sem)))
		return
	case err != nil:
		s.opts.Log.Error().Err(err).Str("request_id", requestIDFrom(r.Context())).Msg("invoke")
		writeError(w, kindInternal, "internal error; the request ID is in the X-Request-ID header")
		return
	}
	// The slot and the body's memory are given back as soon as the call is
	// over, before the result is written: a client slow to take it holds
	// neither. Both parts may be called more than once.
	callDone := func() {
		p.done()
		release()
	}
	defer callDone()
	ctx, cancel, facts := p.ctx, p.cancel, *p.facts
	// The key's policy is asked once the call holds its slot, before any
	// answer is begun: its refusal is a 429 (or a 404) on either kind of
	// call, streamed or not.
	a, refused, ok := s.opts.Registry.Admit(t, facts)
	if !ok {
		writeRefused(w, &refused)
		return
	}

	rc := http.NewResponseController(w)
	if wantsEvents(r) {
		s.invokeStream(r, ctx, cancel, callDone, w, rc, a, t, body, facts)
		return
	}
	// A tool call may take as long as its own deadline allows (the server's
	// write timeout is for the other routes); the result, once there, must
	// be taken by the client within the write timeout. Over HTTP/1 the
	// deadline bounds writes only, and none is made while the call runs:
	// setting it afresh before the result is enough. HTTP/2 resets a
	// stream when its write deadline passes, so there it is lifted first.
	if r.ProtoMajor != 1 {
		_ = rc.SetWriteDeadline(time.Time{})
	}
	res := s.opts.Registry.InvokeAdmitted(ctx, a, body)
	callDone()
	_ = rc.SetWriteDeadline(time.Now().Add(s.opts.StreamWriteTimeout))
	writeResult(w, &s.resultBufs, &res)
}

// invokeStream runs a call and streams the tool's progress as server-sent
// events, each with a JSON object {"text": ...} as data, then one "result"
// event with the object a plain call returns.
func (s *server) invokeStream(r *http.Request, ctx context.Context, cancel, callDone func(), w http.ResponseWriter, rc *http.ResponseController, a registry.Admission, t registry.Target, body []byte, facts callinfo.Facts) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	_ = rc.SetWriteDeadline(time.Now().Add(s.opts.StreamWriteTimeout))
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()

	es := newEventStream(w, rc, s.opts.StreamWriteTimeout, cancel)
	res := s.opts.Registry.InvokeAdmitted(registry.WithProgress(ctx, es.progress), a, body)
	callDone()
	if res.Status == registry.StatusApprovalRequired && s.opts.Approvals != nil {
		res = s.awaitApproval(r, es, t, body, facts, res)
	}
	if !es.finish("result", res.AppendJSON(nil)) {
		s.opts.Log.Warn().Str("request_id", requestIDFrom(ctx)).Str("call_id", res.CallID).Str("key", facts.Key).
			Msg("event stream client stopped reading; the stream was dropped and the call, if still running, canceled")
	}
}

func wantsEvents(r *http.Request) bool {
	return strings.Contains(header(r.Header, "Accept"), "text/event-stream")
}

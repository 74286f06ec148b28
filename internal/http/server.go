// Package http serves the registry over HTTP/JSON: tool definitions, tool
// calls (plain or streamed as server-sent events) and health checks.
package http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/registry"
)

// Options configure the handler.
type Options struct {
	Registry      *registry.Registry
	APIKeys       []string
	MaxBodyBytes  int64
	MaxConcurrent int // tool calls at once; more get 503
	Log           zerolog.Logger
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
}

type server struct {
	opts Options
	sem  chan struct{}
}

// NewHandler returns the service's HTTP handler.
func NewHandler(opts Options) http.Handler {
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = 64
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 10 << 20
	}
	if opts.Stopping == nil {
		opts.Stopping = context.Background()
	}
	s := &server{opts: opts, sem: make(chan struct{}, opts.MaxConcurrent)}
	keys := newKeyChecker(opts.APIKeys)

	r := chi.NewRouter()
	r.Use(requestID, accessLog(opts.Log), recoverer(opts.Log))
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, kindNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, kindMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s", r.Method, r.URL.Path))
	})
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Group(func(r chi.Router) {
		r.Use(keys.auth)
		r.Get("/tools", s.listTools)
		r.Get("/tools/{name}", s.getTool)
		r.Post("/tools/{name}/invoke", s.invoke)
		if opts.Routes != nil {
			opts.Routes(r)
		}
	})
	return r
}

func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	writeRaw(w, http.StatusOK, []byte(`{"status":"ok"}`))
}

func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.opts.Stopping.Err() != nil {
		writeError(w, kindShuttingDown, "the service is shutting down")
		return
	}
	if s.opts.Ready == nil {
		writeRaw(w, http.StatusOK, []byte(`{"status":"ready"}`))
		return
	}
	ok, checks := s.opts.Ready()
	if ok {
		writeJSON(w, http.StatusOK, readyBody{Status: "ready", Checks: checks})
		return
	}
	// The error envelope is kept beside the checks for clients that read
	// only error.code.
	b := readyBody{Status: "not_ready", Checks: checks,
		Error: &readyError{Code: kindNotReady, Message: "not ready: " + failedChecks(checks)}}
	s.opts.Log.Warn().Interface("checks", checks).Msg("not ready")
	w.Header().Set("Retry-After", "1")
	writeJSON(w, statusOf[kindNotReady], b)
}

// readyBody is the body of GET /readyz.
type readyBody struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks,omitempty"`
	Error  *readyError       `json:"error,omitempty"`
}

type readyError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// failedChecks lists the checks that are not "ok", sorted, as "name: why".
func failedChecks(checks map[string]string) string {
	var out []string
	for name, v := range checks {
		if v != "ok" && !strings.HasPrefix(v, "unavailable: ") {
			out = append(out, name+": "+v)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

func (s *server) listTools(w http.ResponseWriter, r *http.Request) {
	writeRaw(w, http.StatusOK, s.opts.Registry.DefinitionsJSON())
}

func (s *server) getTool(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	def, ok := s.opts.Registry.DefinitionJSON(name)
	if !ok {
		writeError(w, kindUnknownTool, unknownTool(name))
		return
	}
	writeRaw(w, http.StatusOK, def)
}

func unknownTool(name string) string {
	return fmt.Sprintf("Tool '%s' not found. Please use only the tools provided in the tool definitions (GET /tools).", name)
}

func (s *server) invoke(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	if !s.opts.Registry.Has(name) {
		writeError(w, kindUnknownTool, unknownTool(name))
		return
	}
	if s.opts.Stopping.Err() != nil {
		writeError(w, kindShuttingDown, "the service is shutting down; retry on another instance")
		return
	}
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	default:
		writeError(w, kindOverloaded, fmt.Sprintf("%d tool calls are already running; retry shortly", cap(s.sem)))
		return
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, kindBodyTooLarge, fmt.Sprintf("the request body is larger than %d bytes. For write_file, send large content in several calls with mode=append.", s.opts.MaxBodyBytes))
			return
		}
		writeError(w, kindBadRequest, "could not read the request body")
		return
	}

	// A call stops when its client goes away or when the service stops.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.opts.Stopping, cancel)
	defer stop()

	// A tool call may take as long as its own deadline allows; the server's
	// write timeout is for the other routes.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})

	meta := registry.Meta{
		SessionID: headerValue(r, "X-Session-ID"),
		Source:    headerValue(r, "X-Source"),
	}
	if wantsEvents(r) {
		s.invokeStream(ctx, w, rc, name, body, meta)
		return
	}
	res := s.opts.Registry.Invoke(ctx, name, body, meta)
	writeJSON(w, http.StatusOK, res)
}

// invokeStream runs a call and streams the tool's progress as server-sent
// events, then one "result" event with the object a plain call returns.
func (s *server) invokeStream(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, name string, body []byte, meta registry.Meta) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()

	var mu sync.Mutex
	send := func(event, data string) {
		mu.Lock()
		defer mu.Unlock()
		writeEvent(w, event, data)
		_ = rc.Flush()
	}
	meta.Progress = send
	res := s.opts.Registry.Invoke(ctx, name, body, meta)
	data, err := marshal(res)
	if err != nil {
		data = []byte(`{"error":{"code":"internal_error","message":"internal error"}}`)
	}
	send("result", string(data))
}

// writeEvent writes one SSE event; a data value with newlines becomes
// several data lines, which clients join with newlines again.
func writeEvent(w io.Writer, event, data string) {
	var b strings.Builder
	b.WriteString("event: ")
	b.WriteString(event)
	b.WriteByte('\n')
	for _, line := range strings.Split(data, "\n") {
		b.WriteString("data: ")
		b.WriteString(strings.TrimSuffix(line, "\r"))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	_, _ = io.WriteString(w, b.String())
}

func wantsEvents(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// headerValue returns a header bounded in length and stripped of control
// characters, since it ends up in the audit log.
func headerValue(r *http.Request, name string) string {
	v := r.Header.Get(name)
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

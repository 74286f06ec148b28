package mcpmount

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/egress"
	"github.com/countbot/toolsvc/internal/pkgcache"
	"github.com/countbot/toolsvc/internal/redact"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/sandbox"
	"github.com/countbot/toolsvc/internal/tracing"
	"github.com/countbot/toolsvc/internal/workspace"
)

// Deps are what a Server needs from the service.
type Deps struct {
	// Sandbox returns the sandbox stdio servers run in, with the network
	// on or off as the server's entry says: exec's settings (mode,
	// workspace, private paths, HOME writable, limits, user) with
	// Options.Network set per call. Sandboxes.For is one. Required for
	// stdio servers.
	Sandbox func(n Net) (*sandbox.Sandbox, error)
	// Workspace is where a stdio server's cwd is resolved and where
	// images and resources from results are saved, each into the calling
	// key's own folder. Required.
	Workspace *workspace.Workspace
	// Home is a stdio server's HOME, kept between starts (exec's
	// TOOLSVC_EXEC_HOME). Empty: each start of the server gets a fresh
	// HOME of its own, the folder "home" in its private temporary
	// folder, as each exec call does.
	Home string
	// Caches, when set, gives each stdio server a package cache of its
	// own, kept between its starts and the service's restarts, writable
	// in its sandbox and in no other (see pkgcache): npm, uv, pip, pnpm
	// and bun are pointed at it, so that a restart runs what npx or uvx
	// downloaded before. A per_key server's instance for a key gets the
	// key's own. It applies with Home set too: HOME is shared by every
	// server and command, a cache is one server's. Nil: the package
	// managers keep their caches in HOME.
	Caches *pkgcache.Caches
	// TempDir holds each stdio server's private temporary folder, made
	// when it starts and removed when it stops; default os.TempDir().
	TempDir string
	// Owner, when set, owns the temporary folder (TOOLSVC_EXEC_USER).
	Owner *sandbox.User
	// EnvAllow names more of the service's variables passed to stdio
	// servers, as for exec ("NAME" or "PREFIX_*"). PATH, LANG, LC_*, TZ
	// and TERM always pass; nothing else of the service's environment.
	EnvAllow []string
	// Environ returns the service's environment; default os.Environ.
	Environ func() []string
	// LookupEnv resolves ${NAME} in headers and env values; default
	// os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Log receives the server's stderr (bounded, redacted), its restarts
	// and the tools it skipped or renamed.
	Log zerolog.Logger
	// Redact removes the service's own secrets from what the server
	// writes to the log and from error messages; the server's header and
	// env secrets (Secrets) are removed in any case. Nil: only those.
	Redact func(string) string
	// Transport is the base of the HTTP client for Streamable HTTP
	// servers; default a clone of http.DefaultTransport. These URLs are
	// the operator's, so netguard does not apply; a redirect to another
	// host is refused.
	Transport http.RoundTripper
	// ConnectTimeout bounds starting the server, the initialize handshake
	// and the first tools/list; default 30 s.
	ConnectTimeout time.Duration
	// PingTimeout bounds the ping sent after a call got no answer within
	// its timeout: a server that does not answer it either is taken for
	// stuck and restarted. Default 10 s.
	PingTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before a restart, doubled
	// after each failure in a row; defaults 1 s and 1 min.
	MinBackoff, MaxBackoff time.Duration
	// MaxMessage bounds one message from the server, in bytes; a larger
	// one ends the connection (a stdio server is killed and restarted)
	// and the call gets an error saying so. Default 16 MiB.
	MaxMessage int
	// MaxOutput bounds the text of a result in characters; more is cut
	// in the middle with a note. Default 50 000.
	MaxOutput int
	// MaxFileBytes bounds one image or resource saved into the workspace;
	// a larger one is not saved and the result says so. Default 10 MiB.
	MaxFileBytes int
	// Egress is the proxy's settings for a server whose network is an
	// allowlist (its guard and log; the rules are the entry's): the
	// proxy dials through the guard, which refuses loopback, private and
	// metadata addresses unless the operator opened them.
	Egress egress.Options
	// Folder is the workspace folder that receives saved content, in a
	// sub-folder per server; default "mcp".
	Folder string
	// Tracer, when set, gives each call a client span (tools/call
	// {tool}) and passes its trace context on in the request's _meta, so
	// that a server that traces joins the caller's trace. Nil: none.
	Tracer *tracing.Tracer
}

func (d *Deps) defaults() {
	if d.TempDir == "" {
		d.TempDir = os.TempDir()
	}
	if d.Environ == nil {
		d.Environ = os.Environ
	}
	if d.LookupEnv == nil {
		d.LookupEnv = lookupEnv0
	}
	if d.Transport == nil {
		d.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	if d.ConnectTimeout <= 0 {
		d.ConnectTimeout = 30 * time.Second
	}
	if d.PingTimeout <= 0 {
		d.PingTimeout = 10 * time.Second
	}
	if d.MinBackoff <= 0 {
		d.MinBackoff = time.Second
	}
	if d.MaxBackoff < d.MinBackoff {
		d.MaxBackoff = max(time.Minute, d.MinBackoff)
	}
	if d.MaxMessage <= 0 {
		d.MaxMessage = 16 << 20
	}
	if d.MaxOutput <= 0 {
		d.MaxOutput = 50000
	}
	if d.MaxFileBytes <= 0 {
		d.MaxFileBytes = 10 << 20
	}
	if d.Folder == "" {
		d.Folder = "mcp"
	}
}

// ConfigError is why a server whose configuration cannot work did not
// start (an unset ${NAME}, no sandbox for a stdio server): no restart can
// mend it, so the server is not retried.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// IsConfigError reports whether err, from Start, says the server's
// configuration can never work (as opposed to a server that failed to
// start this time and is retried in the background).
func IsConfigError(err error) bool {
	var c *ConfigError
	return errors.As(err, &c)
}

// brokenError is why a call to a server whose configuration cannot work
// fails.
type brokenError struct{ err error }

func (e *brokenError) Error() string { return e.err.Error() }

// errClosed is why a call after Close fails.
var errClosed = errors.New("stopped")

// upFor is how long a connection must last for the backoff to start
// again from MinBackoff.
const upFor = time.Minute

// maxTools bounds the tools taken from one server.
const maxTools = 500

// Server is one mounted MCP server: its connection, restarted when it
// ends, and its current tools. It is safe for concurrent use.
type Server struct {
	name   string
	cfg    Config
	d      Deps
	log    zerolog.Logger
	res    resolved
	resErr error
	red    *redact.Redactor
	// files is the workspace whose folder of the calling key receives the
	// images and resources of results (see save): the whole workspace,
	// also for a key's instance, whose own workspace is that folder.
	files *workspace.Workspace
	// keyed, for the listing instance of a per_key server, runs the keys'
	// instances its tools' calls go to; nil otherwise.
	keyed *instances
	// cacheKey, for a key's instance of a per_key server, names the key
	// whose package cache it keeps; nil: the server's own.
	cacheKey *string
	// net is the network the server's process gets: the entry's, or its
	// package registry's (registry) for a package runner that gives none;
	// rules decide an allowlist's destinations.
	net      Network
	registry bool
	rules    *egress.Rules

	life   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	started bool
	closed  bool
	broken  bool  // its configuration cannot work: never retried
	conn    *conn // nil while down
	status  error
	// begun is when Begin started it; tried is set once its first
	// connection attempt has ended, either way (until then it is
	// starting); retryAt is when the attempt after a failure begins.
	begun   time.Time
	tried   bool
	retryAt time.Time
	// listed is set once its tools have been listed and published.
	listed   bool
	tools    []registry.Tool
	toolSig  string        // names, descriptions and schemas of tools, to see a change
	changed  chan struct{} // closed and replaced at every change of conn or tools
	onChange []func()      // OnToolsChanged
	progress sync.Map      // progress token -> context of the call
	token    atomic.Uint64 // last progress token
	listReq  chan struct{} // list_changed seen, for the refresher
	inflight int           // calls running
	idle     chan struct{} // closed when inflight drops to zero; nil when nobody waits
}

// New returns a server that is not started yet. name is the key of its
// mcpServers entry.
func New(name string, cfg Config, d Deps) *Server {
	d.defaults()
	s := &Server{name: name, cfg: cfg, d: d, changed: make(chan struct{}), listReq: make(chan struct{}, 1),
		status: errors.New("not started")}
	s.log = d.Log.With().Str("mcp_server", name).Logger()
	ws := ""
	if d.Workspace != nil {
		ws = d.Workspace.Dir()
	}
	s.files = d.Workspace
	s.res, s.resErr = cfg.resolve(ws, d.LookupEnv)
	s.net = cfg.Network
	if !s.net.Given && cfg.Type == TypeStdio {
		if kind, _ := s.launcher(); kind != "" {
			if allow := registryAllow(kind, d.LookupEnv); len(allow) > 0 {
				s.net, s.registry = Network{Allow: allow}, true
			}
		}
	}
	if len(s.net.Allow) > 0 {
		// Checked when the entry was read; a registry's own entry is one
		// host and port.
		if s.rules, s.resErr = egress.ParseRules(s.net.Allow, nil); s.resErr != nil {
			s.resErr = fmt.Errorf("network: %w", s.resErr)
		}
	}
	s.red = redact.New(s.res.secrets...)
	s.life, s.cancel = context.WithCancel(context.Background())
	return s
}

// network is the network the server's process gets, as the log shows it.
func (s *Server) network() Network { return s.net }

// netKind is the sandbox's network for it.
func (s *Server) netKind() Net {
	switch {
	case s.net.On:
		return NetOn
	case len(s.net.Allow) > 0:
		return NetAllow
	}
	return NetOff
}

// Name returns the server's name.
func (s *Server) Name() string { return s.name }

// Secrets returns the values of the server's headers and secret env
// variables, with every ${NAME} resolved: the caller adds them to the
// redaction of results, logs and audit records.
func (s *Server) Secrets() []string { return slices.Clone(s.res.secrets) }

// redact removes the service's and the server's secrets from text.
func (s *Server) redact(text string) string {
	text = s.red.String(text)
	if s.d.Redact != nil {
		text = s.d.Redact(text)
	}
	return text
}

// Start connects to the server and lists its tools, as Begin does, and
// waits for the first attempt: it returns its error if that fails within
// Deps.ConnectTimeout (or ctx ends first); either way the server is then
// kept up in the background. A key's instance of a per_key server is
// started so, by the call that needs it.
func (s *Server) Start(ctx context.Context) error {
	first := make(chan error, 1)
	if err := s.Begin(func(err error) { first <- err }); err != nil {
		return err
	}
	select {
	case err := <-first:
		return err
	case <-ctx.Done():
		return fmt.Errorf("MCP server %s: %w", s.name, ctx.Err())
	}
}

// Begin starts the server in the background and returns at once: it
// connects (starts the program, or reaches the URL), initializes the
// session and lists the tools, within Deps.ConnectTimeout, and keeps it
// up, restarted with backoff whenever it fails or its connection ends,
// until Close. onFirst, when not nil, is told how the first attempt
// ended (nil: up) once it has. A configuration that cannot work (an
// unset ${NAME}, no sandbox) is Begin's error, a ConfigError, and the
// server is not started.
func (s *Server) Begin(onFirst func(error)) error {
	s.mu.Lock()
	if s.started || s.closed {
		s.mu.Unlock()
		return fmt.Errorf("MCP server %s: already started or closed", s.name)
	}
	s.started = true
	s.begun = time.Now()
	s.status = fmt.Errorf("MCP server %s: starting", s.name)
	s.mu.Unlock()
	if err := s.checkConfig(); err != nil {
		s.mu.Lock()
		s.broken = true
		s.mu.Unlock()
		s.setStatus(err)
		return &ConfigError{err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("MCP server %s: %w", s.name, errClosed)
	}
	// Added under the lock Close takes before it waits: no goroutine
	// starts after Close has begun to wait.
	s.wg.Add(2)
	go s.run(onFirst)
	go s.refresher()
	return nil
}

// Phase is where a server stands.
type Phase int

const (
	// Starting: its first attempt to connect runs; its tools are not
	// known yet.
	Starting Phase = iota
	// Up: connected.
	Up
	// Down: not connected; restarted in the background.
	Down
	// Broken: its configuration cannot work; never retried.
	Broken
	// Stopped: closed.
	Stopped
)

// State is a server's phase, with what goes with it.
type State struct {
	Phase Phase
	// Since is when the server was started (Begin).
	Since time.Time
	// Err is why it is down, broken or stopped.
	Err error
	// RetryAt is when the next attempt of a server that is down begins;
	// zero or past while one runs.
	RetryAt time.Time
	// Listed: the server has listed its tools at least once, so that the
	// names of its tools are known.
	Listed bool
}

// State returns the server's state now.
func (s *Server) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := State{Since: s.begun, Listed: s.listed, Err: s.status}
	switch {
	case s.closed:
		st.Phase = Stopped
	case s.broken:
		st.Phase = Broken
	case s.conn != nil && !s.conn.ended():
		st.Phase, st.Err = Up, nil
	case !s.tried:
		st.Phase = Starting
	default:
		st.Phase, st.RetryAt = Down, s.retryAt
	}
	if st.Phase != Up && st.Err == nil {
		st.Err = fmt.Errorf("MCP server %s: not connected", s.name)
	}
	return st
}

// checkConfig finds what no restart can mend.
func (s *Server) checkConfig() error {
	if s.resErr != nil {
		return fmt.Errorf("MCP server %s: %w", s.name, s.resErr)
	}
	if s.cfg.Type == TypeStdio {
		if s.d.Sandbox == nil {
			return fmt.Errorf("MCP server %s: stdio servers run in exec's sandbox, and there is none here", s.name)
		}
		if _, err := s.sandbox(); err != nil {
			return fmt.Errorf("MCP server %s: stdio servers run in exec's sandbox, which is not available: %w", s.name, err)
		}
	}
	if s.d.Workspace == nil {
		return fmt.Errorf("MCP server %s: no workspace", s.name)
	}
	return nil
}

// run keeps the server connected until Close: connect, wait for the end
// of the connection, wait the backoff, again. first, when not nil, is
// told how the first attempt ended.
func (s *Server) run(first func(error)) {
	defer s.wg.Done()
	failures := 0
	for {
		c, err := s.connect()
		if err != nil {
			if s.life.Err() != nil {
				if first != nil {
					first(err)
				}
				return
			}
			failures++
			wait := s.backoff(failures)
			s.mu.Lock()
			s.status, s.tried, s.retryAt = err, true, time.Now().Add(wait)
			s.signalLocked()
			s.mu.Unlock()
			if first != nil {
				first(err)
				first = nil
			}
			s.log.Warn().Err(errors.New(s.redact(err.Error()))).Dur("retry_in", wait).Msg("mcp server: start failed")
			if !s.sleep(wait) {
				return
			}
			continue
		}
		if first != nil {
			first(nil)
			first = nil
		}
		up := time.Now()
		s.log.Info().Int("tools", len(s.Tools())).Msg("mcp server: connected")
		select {
		case <-c.done:
		case <-s.life.Done():
			c.close()
			return
		}
		why := c.why()
		s.mu.Lock()
		if s.conn == c {
			s.conn = nil
			s.status = why
			s.signalLocked()
		}
		s.mu.Unlock()
		if s.life.Err() != nil {
			return
		}
		if time.Since(up) >= upFor {
			failures = 0
		}
		failures++
		wait := s.backoff(failures)
		s.log.Warn().Err(errors.New(s.redact(why.Error()))).Dur("restart_in", wait).Msg("mcp server: connection ended; restarting")
		if !s.sleep(wait) {
			return
		}
	}
}

func (s *Server) backoff(failures int) time.Duration {
	d := s.d.MinBackoff
	for i := 1; i < failures && d < s.d.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.d.MaxBackoff)
}

func (s *Server) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.life.Done():
		return false
	}
}

// connect starts (or reaches) the server, initializes the session and
// lists the tools, within ConnectTimeout, and installs the connection.
func (s *Server) connect() (*conn, error) {
	ctx, cancel := context.WithTimeout(s.life, s.d.ConnectTimeout)
	defer cancel()
	var c *conn
	var err error
	if s.cfg.Type == TypeHTTP {
		c, err = s.connectHTTP(ctx)
	} else {
		c, err = s.connectStdio(ctx)
	}
	if err != nil {
		return nil, err
	}
	tools, err := s.list(ctx, c)
	if err != nil {
		c.close()
		return nil, s.connectError(ctx, c, "tools/list", err)
	}
	s.mu.Lock()
	changed := !s.closed && s.setToolsLocked(tools)
	s.mu.Unlock()
	// The tools are published before the connection is installed, so that
	// once the server is up (State, /readyz) its tools are found; a call
	// of one meanwhile waits for the connection (await).
	if changed {
		s.notify()
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.close()
		return nil, errors.New("closed")
	}
	s.conn = c
	s.status, s.tried, s.listed = nil, true, true
	s.signalLocked()
	s.mu.Unlock()
	return c, nil
}

// connectError explains why the handshake or first listing failed, with
// its likely cause when what the server printed and how it ended tell.
func (s *Server) connectError(ctx context.Context, c *conn, step string, err error) error {
	timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
	if c != nil {
		if timedOut || s.life.Err() != nil {
			// Not answering, or the service stops: nothing to wait for.
			c.abort()
		} else {
			// It failed on its own: its exit status comes once it is
			// reaped.
			c.close()
		}
		if s.life.Err() != nil {
			return fmt.Errorf("MCP server %s: stopped while starting", s.name)
		}
		cause := ""
		if c.child != nil {
			cause = s.likelyCause(failure{stderr: s.redact(c.stderrTail()), exit: c.child.exitErr(), timedOut: timedOut})
		}
		if g := c.limit.garbage(); timedOut && g == "" {
			what := fmt.Sprintf("the server started but did not speak MCP on its %s", s.channel())
			if cause != "" {
				what = "likely cause: " + cause
			}
			msg := fmt.Sprintf("MCP server %s: no answer to %s within %s (%s); it was stopped", s.name, step, s.d.ConnectTimeout, what)
			if tail := c.stderrTail(); tail != "" {
				msg += "; its stderr ended with:\n" + s.redact(tail)
			}
			return errors.New(msg)
		}
		if why := c.diagnose(); why != "" {
			if cause != "" {
				return fmt.Errorf("MCP server %s: %s failed (likely cause: %s): %s", s.name, step, cause, why)
			}
			return fmt.Errorf("MCP server %s: %s failed: %s", s.name, step, why)
		}
	}
	if timedOut {
		return fmt.Errorf("MCP server %s: no answer to %s within %s", s.name, step, s.d.ConnectTimeout)
	}
	return fmt.Errorf("MCP server %s: %s failed: %s", s.name, step, s.redact(err.Error()))
}

func (s *Server) channel() string {
	if s.cfg.Type == TypeHTTP {
		return "URL"
	}
	return "stdout"
}

// client builds the go-sdk client of one connection.
func (s *Server) client() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "toolsvc", Version: "1"}, &mcp.ClientOptions{
		// No roots, sampling or elicitation: toolsvc answers for no model
		// and no user here.
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case s.listReq <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if req == nil || req.Params == nil {
				return
			}
			if v, ok := s.progress.Load(fmt.Sprint(req.Params.ProgressToken)); ok {
				p := req.Params
				text := fmt.Sprintf("%g", p.Progress)
				if p.Total > 0 {
					text += fmt.Sprintf("/%g", p.Total)
				}
				if p.Message != "" {
					text += " " + runes.Shorten(strings.ToValidUTF8(p.Message, "\uFFFD"), maxLine)
				}
				registry.Progress(v.(context.Context), "progress", s.redact(text)+"\n")
			}
		},
	})
}

// list reads every page of the server's tools and turns them into
// registry tools.
func (s *Server) list(ctx context.Context, c *conn) ([]registry.Tool, error) {
	var remote []*mcp.Tool
	for t, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		if len(remote) == maxTools {
			s.log.Warn().Int("max", maxTools).Msg("mcp server: more tools than the limit; the rest are left out")
			break
		}
		remote = append(remote, t)
	}
	return s.mount(remote), nil
}

// refresher lists the tools again after each list_changed notification.
func (s *Server) refresher() {
	defer s.wg.Done()
	for {
		select {
		case <-s.life.Done():
			return
		case <-s.listReq:
		}
		s.mu.Lock()
		c := s.conn
		s.mu.Unlock()
		if c == nil {
			continue // the next connection lists them anyway
		}
		ctx, cancel := context.WithTimeout(s.life, s.d.ConnectTimeout)
		tools, err := s.list(ctx, c)
		cancel()
		if err != nil {
			s.log.Warn().Err(errors.New(s.redact(err.Error()))).Msg("mcp server: listing the tools after list_changed failed; keeping the previous list")
			continue
		}
		s.mu.Lock()
		changed := s.conn == c && s.setToolsLocked(tools)
		if changed {
			s.signalLocked()
		}
		s.mu.Unlock()
		if changed {
			s.log.Info().Int("tools", len(tools)).Msg("mcp server: tool list changed")
			s.notify()
		}
	}
}

// setToolsLocked installs tools and reports whether they differ from the
// previous ones.
func (s *Server) setToolsLocked(tools []registry.Tool) bool {
	var b strings.Builder
	for _, t := range tools {
		b.WriteString(t.Name())
		b.WriteByte(0)
		b.WriteString(t.Description())
		b.WriteByte(0)
		b.Write(t.Parameters())
		b.WriteByte(0)
	}
	sig := b.String()
	if sig == s.toolSig && s.tools != nil {
		return false
	}
	s.tools, s.toolSig = tools, sig
	return true
}

func (s *Server) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) setStatus(err error) {
	s.mu.Lock()
	s.status = err
	s.signalLocked()
	s.mu.Unlock()
}

func (s *Server) notify() {
	s.mu.Lock()
	fns := slices.Clone(s.onChange)
	s.mu.Unlock()
	for _, f := range fns {
		f()
	}
}

// detach stops using c: calls wait for the next connection, which the
// restart loop makes once c has ended.
func (s *Server) detach(c *conn, why error) {
	s.mu.Lock()
	if s.conn == c {
		s.conn = nil
		s.status = fmt.Errorf("MCP server %s: reconnecting: %w", s.name, why)
		s.signalLocked()
	}
	s.mu.Unlock()
	go c.close()
}

// Tools returns the server's current tools, named "<server>__<tool>". The
// last list is kept while the server restarts, so that the tools stay
// known and a call waits for the restart or says the server is down.
func (s *Server) Tools() []registry.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tools)
}

// OnToolsChanged registers fn, called (not under any lock of the server)
// whenever the tool list changes: after a list_changed notification, or a
// restart that brought a different list.
func (s *Server) OnToolsChanged(fn func()) {
	s.mu.Lock()
	s.onChange = append(s.onChange, fn)
	s.mu.Unlock()
}

// Status returns nil while the server is connected, else why it is not.
func (s *Server) Status() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		if s.conn.ended() {
			return s.conn.why()
		}
		return nil
	}
	if s.status == nil {
		return fmt.Errorf("MCP server %s: not connected", s.name)
	}
	return s.status
}

// await returns the current connection, waiting for one while the server
// restarts, at most until ctx ends or ConnectTimeout passes.
func (s *Server) await(ctx context.Context) (*conn, error) {
	timer := time.NewTimer(s.d.ConnectTimeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		c, ch, status, closed, broken := s.conn, s.changed, s.status, s.closed, s.broken
		s.mu.Unlock()
		if broken {
			return nil, &brokenError{status}
		}
		if c != nil {
			select {
			case <-c.done:
				// Ended, and not yet replaced: wait for the restart.
			default:
				return c, nil
			}
		}
		switch {
		case closed:
			return nil, errClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			if status == nil {
				status = errors.New("not connected")
			}
			return nil, status
		}
	}
}

// Drain waits until no call of the server's tools is running, or ctx is
// done. A reload that replaces or removes a server takes its tools out of
// the registry first, so no new call starts, then drains it before closing
// it: the calls in flight finish on the server they started on.
func (s *Server) Drain(ctx context.Context) {
	s.mu.Lock()
	if s.inflight == 0 {
		s.mu.Unlock()
		return
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

// begin counts a call of one of the server's tools; end uncounts it.
func (s *Server) begin() {
	s.mu.Lock()
	s.inflight++
	s.mu.Unlock()
}

func (s *Server) end() {
	s.mu.Lock()
	s.inflight--
	if s.inflight == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
	s.mu.Unlock()
}

// Close stops the server: the session is closed, a stdio server's stdin
// closed, and the server and everything it started are killed if they do
// not exit within a moment. Calls in flight end with an error.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	c := s.conn
	s.conn = nil
	s.status = fmt.Errorf("MCP server %s: stopped", s.name)
	s.signalLocked()
	s.mu.Unlock()
	// The connection first, so that a stdio server sees its stdin close
	// and may exit cleanly (flush its files) before anything is killed;
	// then the rest: a start in progress, the restart loop.
	if c != nil {
		c.close()
	}
	s.cancel()
	s.wg.Wait()
	if s.keyed != nil {
		s.keyed.close()
	}
	return nil
}

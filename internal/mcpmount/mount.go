package mcpmount

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/ready"
	"github.com/countbot/toolsvc/internal/redact"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
)

// Registry is where a Mount keeps the servers' tools, one set per server
// (*registry.Registry is one). Its default set, "", holds the built-in
// tools, whose names no server's tool may take.
type Registry interface {
	ReplaceSet(set string, tools []registry.Tool) error
	Set(set string) []string
}

// MountOptions are what a Mount takes from the service.
type MountOptions struct {
	// Registry receives the servers' tools. Required.
	Registry Registry
	// Deps are the parts every server shares: the workspace, exec's
	// environment allowlist, HOME, the output bound, how ${NAME} is
	// resolved. The Mount sets their Log, Redact, Sandbox and Owner.
	Deps Deps
	Log  zerolog.Logger
	// Redactor is the service's redaction: each server's header and env
	// secrets join it before the server starts, and what the Mount logs
	// or reports passes it. Nil: one of the servers' secrets only.
	Redactor *redact.Redactor
	// Sandbox holds exec's sandbox options (its mode, paths, user and
	// limits): stdio servers run in sandboxes built from them, with the
	// network as each entry says. Nil: a stdio server cannot start, for
	// the reason NoSandbox gives; Streamable HTTP servers need none.
	Sandbox   *sandbox.Options
	NoSandbox string
	// CallTimeout is the longest a call may take: a server a reload
	// replaced or removed is closed once its calls in flight have
	// finished, after at most this long (or the server's own timeout,
	// when longer).
	CallTimeout time.Duration
}

// Mount runs the MCP servers of the tools file and keeps their tools in
// the registry: one set per server, replaced whenever its list changes.
// A reload starts the servers it adds or changes beside the running ones
// and puts them in use only once every name checks. It is safe for
// concurrent use; Prepare and the commit it returns make one change at a
// time, which the caller does not overlap with another.
type Mount struct {
	reg       Registry
	deps      Deps
	log       zerolog.Logger
	red       *redact.Redactor
	sandboxes *Sandboxes // exec's, for stdio servers; nil without them

	// Servers a reload replaced or removed are drained in the background:
	// their calls in flight finish, for at most a call's time, before they
	// are closed. Close ends the drains at once and waits for them.
	callTimeout time.Duration
	drainCtx    context.Context
	drainStop   context.CancelFunc
	draining    sync.WaitGroup

	mu       sync.Mutex // the servers, the switches and publishing
	servers  map[string]*mounted
	switches func(server, tool string) (string, bool)
	off      map[string]string // a server's tool: why it is left out (the switches, a clash)
	taken    map[string]string // the names the caller holds, and what holds each
}

// mounted is one running server of the tools file's mcpServers.
type mounted struct {
	name string
	raw  []byte // the entry as written, compacted: a reload compares it
	cfg  Config
	srv  *Server
	// prefix starts the names of its tools: the name made valid, "__".
	prefix string
	// live is set once the server's tools may be in the registry (under
	// Mount.mu): a server started by a reload that is then given up never
	// publishes, nor one that was removed.
	live bool
	// outcome is set once its first attempt to start has ended, logged
	// once the log has said how (both under Mount.mu).
	outcome, logged bool
}

// entry is one server of mcpServers as parsed, with its compacted JSON.
type entry struct {
	cfg Config
	raw []byte
}

// NewMount returns a Mount with no server running.
func NewMount(o MountOptions) *Mount {
	if o.Redactor == nil {
		o.Redactor = redact.New()
	}
	m := &Mount{reg: o.Registry, deps: o.Deps, log: o.Log, red: o.Redactor, callTimeout: o.CallTimeout,
		servers: map[string]*mounted{}, switches: allOn, off: map[string]string{}}
	m.drainCtx, m.drainStop = context.WithCancel(context.Background())
	m.deps.Log = o.Log
	m.deps.Redact = o.Redactor.String
	if o.Sandbox != nil {
		m.sandboxes = NewSandboxes(*o.Sandbox)
		m.deps.Sandbox = m.sandboxes.For
		m.deps.Owner = o.Sandbox.User
	} else {
		why := o.NoSandbox
		m.deps.Sandbox = func(Net) (*sandbox.Sandbox, error) { return nil, errors.New(why) }
	}
	return m
}

func allOn(string, string) (string, bool) { return "", false }

// setOf is the registry set that holds the tools of the server name, so
// that each server's list is replaced on its own when it changes.
func setOf(name string) string { return "mcp:" + name }

// CheckEntries checks each entry of a tools file's mcpServers, as Prepare
// will take them: an error names the server.
func CheckEntries(entries map[string]json.RawMessage) error {
	_, err := parseEntries(entries, nil)
	return err
}

// parseEntries returns the entries that are not disabled, by name;
// disabled is told the name of each of the others.
func parseEntries(entries map[string]json.RawMessage, disabled func(name string)) (map[string]entry, error) {
	out := map[string]entry{}
	for _, name := range sortedKeys(entries) {
		raw := entries[name]
		cfg, err := ParseConfig(raw)
		if err != nil {
			return nil, fmt.Errorf("mcpServers %q: %w", name, err)
		}
		if cfg.Disabled {
			if disabled != nil {
				disabled(name)
			}
			continue
		}
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			b.Reset()
			b.Write(raw)
		}
		out[name] = entry{cfg: cfg, raw: b.Bytes()}
	}
	return out, nil
}

// newServer makes (does not start) the server of e: for a per_key entry,
// its listing instance (see newListing). Its header and env secrets join
// the service's redaction before it starts.
func (m *Mount) newServer(name string, e entry) (*mounted, error) {
	m.red.Add(e.cfg.Secrets(m.deps.Workspace.Dir(), m.deps.LookupEnv)...)
	s := &mounted{name: name, raw: e.raw, cfg: e.cfg, prefix: badNameChars.ReplaceAllString(name, "_") + "__"}
	if e.cfg.PerKey {
		srv, err := newListing(name, e.cfg, m.deps, m.red.Add)
		if err != nil {
			return nil, fmt.Errorf("mcpServers %q: %w", name, err)
		}
		s.srv = srv
	} else {
		s.srv = New(name, e.cfg, m.deps)
	}
	m.red.Add(s.srv.Secrets()...)
	s.srv.OnToolsChanged(func() { m.changed(s) })
	return s, nil
}

// beginAll starts the servers in the background and returns at once:
// nothing waits for a server to come up, and each says how its first
// attempt went in the log when it has (first). A server whose
// configuration can never work is an error (the servers are then
// closed).
func (m *Mount) beginAll(servers []*mounted) error {
	var fatal []error
	for _, s := range servers {
		if err := s.srv.Begin(func(err error) { m.first(s) }); err != nil {
			fatal = append(fatal, fmt.Errorf("mcpServers %q: %w", s.name, err))
		}
	}
	if len(fatal) > 0 {
		closeServers(servers)
		return errors.Join(fatal...)
	}
	return nil
}

// first takes note that s's first attempt to start has ended, and logs
// how once s is in use (commit logs it otherwise).
func (m *Mount) first(s *mounted) {
	m.mu.Lock()
	s.outcome = true
	log := s.live && !s.logged
	s.logged = s.logged || log
	m.mu.Unlock()
	if log {
		m.logFirst(s)
	}
}

// logFirst logs how s's first attempt to start ended.
func (m *Mount) logFirst(s *mounted) {
	if err := s.srv.Status(); err != nil {
		m.log.Warn().Str("mcp_server", s.name).Err(errors.New(m.red.String(err.Error()))).
			Msg("mcp server: not started; it is retried in the background, and its tools appear when it is up")
	}
	m.logServer(s)
}

// closeServers closes the servers at once and waits for all of them.
func closeServers(servers []*mounted) {
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() { _ = s.srv.Close() })
	}
	wg.Wait()
}

// toolsOf returns the server's tools the switches leave on, and notes in
// off why each other one is off.
func toolsOf(s *mounted, switches func(server, tool string) (string, bool), off map[string]string) []registry.Tool {
	var on []registry.Tool
	for _, t := range s.srv.Tools() {
		if why, no := switches(s.name, t.Name()); no {
			off[t.Name()] = why
			continue
		}
		on = append(on, t)
	}
	return on
}

// publishLocked puts the server's current tools into the registry. A
// tool whose name another holds (a built-in tool, a tool of the caller's,
// another server's) is left out, the others are published, and the
// error names each clash: the servers start in the background, so a
// clash is found only when a server lists its tools, and it leaves out
// that tool rather than the server.
func (m *Mount) publishLocked(s *mounted) error {
	for t := range m.off {
		if strings.HasPrefix(t, s.prefix) {
			delete(m.off, t)
		}
	}
	held := m.heldLocked(s.name)
	var kept []registry.Tool
	var clashes []error
	for _, t := range toolsOf(s, m.switches, m.off) {
		if other, ok := held[t.Name()]; ok {
			m.off[t.Name()] = "its name clashes with " + other + " of that name"
			clashes = append(clashes, fmt.Errorf("tool %q of the MCP server %q clashes with %s of that name; it is left out", t.Name(), s.name, other))
			continue
		}
		kept = append(kept, t)
	}
	if err := m.reg.ReplaceSet(setOf(s.name), kept); err != nil {
		return fmt.Errorf("mcpServers %q: %w", s.name, err)
	}
	return errors.Join(clashes...)
}

// heldLocked returns the names of the tools that are not the server
// name's, and what holds each.
func (m *Mount) heldLocked(name string) map[string]string {
	held := map[string]string{}
	for _, n := range m.reg.Set("") {
		held[n] = "the built-in tool"
	}
	for n, what := range m.taken {
		held[n] = what
	}
	for other := range m.servers {
		if other == name {
			continue
		}
		for _, n := range m.reg.Set(setOf(other)) {
			held[n] = fmt.Sprintf("the tool of the MCP server %q", other)
		}
	}
	return held
}

// changed takes a server's new tool list (it connected, restarted with
// another list, or said its list changed). A tool of it that clashes
// with another is left out, and the log says why; a list the registry
// refuses whole is not taken: the previous one stays.
func (m *Mount) changed(s *mounted) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !s.live {
		return
	}
	if err := m.publishLocked(s); err != nil {
		m.log.Error().Str("mcp_server", s.name).Err(err).Msg("mcp server: tools of its new list were not taken")
	}
	m.log.Info().Str("mcp_server", s.name).Strs("tools", m.reg.Set(setOf(s.name))).Msg("mcp server: tools")
}

// clashes checks that the servers' tools (with the switches) take no name
// held by a built-in tool, by one in taken or by another server's tool,
// and names both of a clash.
func (m *Mount) clashes(servers map[string]*mounted, switches func(server, tool string) (string, bool), taken map[string]string) error {
	held := map[string]string{}
	for _, n := range m.reg.Set("") {
		held[n] = "the built-in tool"
	}
	for n, what := range taken {
		held[n] = what
	}
	var errs []error
	for _, name := range sortedKeys(servers) {
		for _, t := range toolsOf(servers[name], switches, map[string]string{}) {
			if other, ok := held[t.Name()]; ok {
				errs = append(errs, fmt.Errorf("tool %q of the MCP server %q clashes with %s of that name", t.Name(), name, other))
				continue
			}
			held[t.Name()] = fmt.Sprintf("the tool of the MCP server %q", name)
		}
	}
	return errors.Join(errs...)
}

// logServer writes the lines of a server that started: its state, and
// one line per tool as the built-in tools have.
func (m *Mount) logServer(s *mounted) {
	where := s.where()
	ev := m.log.Info()
	state := "up"
	if err := s.srv.Status(); err != nil {
		ev = m.log.Warn().Str("reason", m.red.String(err.Error()))
		state = "down"
	}
	ev = ev.Str("mcp_server", s.name).Str("state", state).Str("type", s.cfg.Type).Str("at", where).
		Str("network", s.srv.network().String()).Bool("subagents", s.cfg.Subagents)
	if s.cfg.PerKey {
		// The state is the listing instance's; each key's own starts at
		// its first call.
		ev = ev.Bool("per_key", true).Dur("idle_timeout", s.cfg.IdleTimeout).Int("max_instances", s.cfg.MaxInstances)
	}
	ev.Msg("mcp server")
	m.mu.Lock()
	off := make(map[string]string, len(m.off))
	for t, why := range m.off {
		off[t] = why
	}
	m.mu.Unlock()
	for _, t := range s.srv.Tools() {
		if why, isOff := off[t.Name()]; isOff {
			m.log.Info().Str("tool", t.Name()).Str("state", "off").Str("source", "mcp").Str("server", s.name).Str("reason", why).Msg("tool")
			continue
		}
		m.log.Info().Str("tool", t.Name()).Str("state", "on").Str("source", "mcp").Str("server", s.name).Bool("subagents", s.cfg.Subagents).Msg("tool")
	}
}

// plan is a change to the servers, made but not yet in use.
type plan struct {
	next     map[string]*mounted // every server after the change
	started  []*mounted          // new or changed, started
	stopped  []*mounted          // removed or changed, to close
	switches func(server, tool string) (string, bool)
	taken    map[string]string
}

// Prepare starts the servers of entries (a tools file's mcpServers) that
// are new or changed since the last commit, beside the running ones,
// which an unchanged entry keeps. It does not wait for them: they start
// in the background, each within the connect timeout, and are retried
// with backoff when they fail; until a server has listed its tools,
// Resolve answers the calls of its names. It checks that no tool known
// now (of the servers kept) that switches leaves on takes the name of a
// built-in tool, of one in taken (the name, and what holds it, "the
// tool of the tools file") or of another server's tool; a server that
// lists a clashing tool later has that tool left out (publishLocked). A
// server whose configuration can never work is an error. On an error the
// servers it started are closed and nothing changed. Otherwise exactly
// one of commit (put the change in use) and abandon (close what Prepare
// started) must follow.
func (m *Mount) Prepare(entries map[string]json.RawMessage, switches func(server, tool string) (string, bool), taken map[string]string) (commit func() error, abandon func(), err error) {
	parsed, err := parseEntries(entries, func(name string) {
		m.log.Info().Str("mcp_server", name).Str("state", "off").Str("reason", `"disabled": true in the tools file`).Msg("mcp server")
	})
	if err != nil {
		return nil, nil, err
	}
	m.mu.Lock()
	cur := m.servers
	m.mu.Unlock()
	p := &plan{next: map[string]*mounted{}, switches: switches, taken: taken}
	for _, name := range sortedKeys(parsed) {
		if old, ok := cur[name]; ok && bytes.Equal(old.raw, parsed[name].raw) {
			p.next[name] = old
			continue
		}
		s, err := m.newServer(name, parsed[name])
		if err != nil {
			closeServers(p.started)
			return nil, nil, err
		}
		p.next[name] = s
		p.started = append(p.started, s)
	}
	for name, old := range cur {
		if p.next[name] != old {
			p.stopped = append(p.stopped, old)
		}
	}
	if err := m.beginAll(p.started); err != nil {
		return nil, nil, err
	}
	if err := m.clashes(p.next, switches, taken); err != nil {
		closeServers(p.started)
		return nil, nil, err
	}
	return func() error { return m.commit(p) }, func() { closeServers(p.started) }, nil
}

// commit puts the plan in use: the tools of removed servers go, every
// server's tools are published with the new switches, and the servers
// removed or replaced are closed once their calls in flight have
// finished (a call still running at the end of the wait ends with an
// error result saying to retry).
func (m *Mount) commit(p *plan) error {
	m.mu.Lock()
	for _, s := range p.stopped {
		s.live = false
		if _, kept := p.next[s.name]; !kept {
			_ = m.reg.ReplaceSet(setOf(s.name), nil)
		}
	}
	m.servers, m.switches, m.off, m.taken = p.next, p.switches, map[string]string{}, p.taken
	var errs []error
	for _, name := range sortedKeys(p.next) {
		s := p.next[name]
		s.live = true
		if err := m.publishLocked(s); err != nil {
			errs = append(errs, err)
		}
	}
	// A server whose first attempt has ended is logged below; one still
	// starting says so now, under the lock first takes, so that its
	// "starting" line comes before the line of how it went.
	var outcome []*mounted
	for _, s := range p.started {
		if s.outcome {
			s.logged = true
			outcome = append(outcome, s)
			continue
		}
		m.logStarting(s)
	}
	m.mu.Unlock()
	for _, s := range p.stopped {
		m.log.Info().Str("mcp_server", s.name).Str("state", "stopped").Msg("mcp server: stopped by the reload")
	}
	for _, s := range outcome {
		m.logFirst(s)
	}
	m.drainAndClose(p.stopped)
	return errors.Join(errs...)
}

// logStarting writes the line of a server that is starting.
func (m *Mount) logStarting(s *mounted) {
	ev := m.log.Info().Str("mcp_server", s.name).Str("state", "starting").Str("type", s.cfg.Type).Str("at", s.where()).
		Str("network", s.srv.network().String()).Dur("connect_timeout", s.srv.d.ConnectTimeout)
	ev.Msg("mcp server: starting in the background; its tools appear when it is up")
}

// where is the command of a stdio server, the URL of another.
func (s *mounted) where() string {
	if s.cfg.Type == TypeStdio {
		return s.cfg.Command
	}
	return s.cfg.URL
}

// drainAndClose closes servers a reload took out of the registry once the
// calls they are running have finished, for at most the longest a call
// may take, in the background: the reload does not wait for them.
func (m *Mount) drainAndClose(servers []*mounted) {
	if len(servers) == 0 {
		return
	}
	m.draining.Go(func() {
		var wg sync.WaitGroup
		for _, s := range servers {
			wg.Go(func() {
				bound := max(m.callTimeout, s.cfg.Timeout)
				ctx, cancel := context.WithTimeout(m.drainCtx, bound)
				defer cancel()
				s.srv.Drain(ctx)
			})
		}
		wg.Wait()
		closeServers(servers)
	})
}

// SubagentTools lists the tools of the servers whose entry says
// "subagents": true, as they are now.
func (m *Mount) SubagentTools() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, name := range sortedKeys(m.servers) {
		if m.servers[name].cfg.Subagents {
			out = append(out, m.reg.Set(setOf(name))...)
		}
	}
	return out
}

// Ready names each server in /readyz ("mcp:<name>"): "ok" once it is
// up; "starting (since 3 s)" while its first attempt to start runs (its
// tools are not known yet); "down, restarting in the background: " and
// why, after an attempt failed or its connection ended; and each tool
// left out ("tool:<name>": "off: " and why: the switches, a clash). No
// server makes the service unready, starting or down: the other tools
// work, the server comes up or is restarted in the background, and a
// call of its tools says it is starting or not running; an orchestrator
// restarting the service would not mend a remote server or a crashing
// program, and would only start every server again.
//
// Why it is down can quote the end of the server's stderr, which the
// Server redacts (the server's secrets and the service's), and the start
// of what it wrote to stdout instead of protocol messages, which it
// quotes as it is: the whole reason passes the service's redaction here,
// which holds the secrets of the service, of every server and of the
// tools file.
func (m *Mount) Ready(checks map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for name, s := range m.servers {
		checks["mcp:"+name] = m.red.String(readyText(s.srv.State(), now))
	}
	for t, why := range m.off {
		checks["tool:"+t] = ready.Off + ": " + why
	}
}

// readyText is /readyz's value of a server in state st at now.
func readyText(st State, now time.Time) string {
	switch st.Phase {
	case Up:
		return "ok"
	case Starting:
		return ready.Starting + " (since " + seconds(now.Sub(st.Since)) + ")"
	case Broken:
		return "down, cannot start: " + st.Err.Error()
	}
	return "down, restarting in the background: " + st.Err.Error()
}

// Close stops every server at once (those draining too), then their
// sandboxes.
func (m *Mount) Close() {
	m.mu.Lock()
	var list []*mounted
	for _, s := range m.servers {
		s.live = false
		list = append(list, s)
	}
	m.servers = nil
	m.mu.Unlock()
	m.drainStop()
	m.draining.Wait()
	closeServers(list)
	if m.sandboxes != nil {
		m.sandboxes.Close()
	}
}

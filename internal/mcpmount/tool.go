package mcpmount

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/tracing"
)

// maxNameLen is the longest tool name every model format accepts.
const maxNameLen = 64

// maxDescription bounds a tool's description, in characters: it goes
// into every prompt.
const maxDescription = 4000

// maxSchemaBytes bounds a tool's schema: it goes into every prompt too.
const maxSchemaBytes = 64 << 10

var badNameChars = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// ToolName returns the name server's tool is mounted as:
// "<server>__<tool>", every character outside [a-zA-Z0-9_-] replaced by
// "_", and a name longer than 64 characters cut to 55 and ended with "_"
// and 8 hex digits of the SHA-256 of the full name, so that the same tool
// always gets the same name and two long names that share a start differ.
func ToolName(server, tool string) string {
	full := server + "__" + tool
	n := badNameChars.ReplaceAllString(full, "_")
	if len(n) <= maxNameLen {
		return n
	}
	return hashed(n, full)
}

func hashed(n, full string) string {
	sum := sha256.Sum256([]byte(full))
	return n[:min(len(n), maxNameLen-9)] + "_" + hex.EncodeToString(sum[:4])
}

// mount turns the server's tool list into registry tools. A tool whose
// schema is unusable is left out with a log line naming it; the others
// stay.
func (s *Server) mount(remote []*mcp.Tool) []registry.Tool {
	var out []registry.Tool
	seen := map[string]string{}
	for _, rt := range remote {
		if rt == nil || rt.Name == "" {
			s.log.Warn().Msg("mcp server: a tool without a name was left out")
			continue
		}
		params, err := normalizeSchema(rt.InputSchema)
		if err != nil {
			s.log.Warn().Str("tool", rt.Name).Err(err).Msg("mcp server: tool left out: its inputSchema is not a usable JSON Schema for an arguments object")
			continue
		}
		name := ToolName(s.name, rt.Name)
		if other, dup := seen[name]; dup {
			// Two names that differ only in characters replaced above.
			name = hashed(name, s.name+"__"+rt.Name)
			s.log.Warn().Str("tool", rt.Name).Str("other", other).Str("name", name).Msg("mcp server: tool renamed: its name clashed with another after invalid characters were replaced")
		}
		if _, dup := seen[name]; dup {
			s.log.Warn().Str("tool", rt.Name).Msg("mcp server: tool left out: the server lists it twice")
			continue
		}
		if name != s.name+"__"+rt.Name {
			s.log.Info().Str("tool", rt.Name).Str("name", name).Msg("mcp server: tool mounted under another name: model formats allow only [a-zA-Z0-9_-], at most 64 characters")
		}
		seen[name] = rt.Name
		out = append(out, &Tool{s: s, name: name, remote: rt.Name, desc: s.describe(rt), params: params, ann: annotations(rt)})
	}
	return out
}

func (s *Server) describe(rt *mcp.Tool) string {
	d := strings.TrimSpace(rt.Description)
	if d == "" {
		d = strings.TrimSpace(rt.Title)
	}
	if d == "" {
		d = fmt.Sprintf("Tool %s.", rt.Name)
	}
	d = strings.ToValidUTF8(d, "\uFFFD")
	if utf8.RuneCountInString(d) > maxDescription {
		d = runes.Prefix(d, maxDescription) + "..."
	}
	return d + fmt.Sprintf(" (From the MCP server %s.)", s.name)
}

// normalizeSchema turns a tool's inputSchema into what the registry takes:
// a JSON Schema with "type": "object". A schema without a type gets it,
// a missing one means no arguments. A top-level "$schema" naming a draft
// the validator does not know is dropped (it validates as draft 7). A
// "$ref" to anything but the schema itself is refused: the validator
// would fetch it from the network.
func normalizeSchema(in any) (json.RawMessage, error) {
	if in == nil {
		return json.RawMessage(`{"type":"object","properties":{}}`), nil
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, errors.New("the schema is not a JSON object")
	}
	switch t := m["type"]; t {
	case nil:
		m["type"] = "object"
	case "object":
	default:
		return nil, fmt.Errorf(`the schema's type is %v, not "object"`, t)
	}
	if v, ok := m["$schema"].(string); ok && !knownDraft(v) {
		delete(m, "$schema")
	}
	optionalDefaults(m)
	if err := localRefs(m); err != nil {
		return nil, err
	}
	raw, err = json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(raw) > maxSchemaBytes {
		return nil, fmt.Errorf("the schema is %d bytes, more than the %d a tool definition may take in a prompt", len(raw), maxSchemaBytes)
	}
	if err := registry.CheckSchema(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// optionalDefaults takes out of "required", in the schema m and in every
// schema nested in it, the properties that have a "default". Such a
// property is optional to the server by definition: it applies its
// default when the property is left out (Playwright MCP lists "scale",
// default "css", as both). But a client that makes schemas strict (every
// property required, as OpenAI's strict mode asks) or a model that reads
// "required" literally would be made to send a value it has no reason to
// choose. So the schema the service offers, and checks calls against,
// does not require it; nothing is filled in either: the server's default
// applies, and a value the model sends is passed on as it is.
func optionalDefaults(v any) {
	switch v := v.(type) {
	case map[string]any:
		props, _ := v["properties"].(map[string]any)
		if req, ok := v["required"].([]any); ok && props != nil {
			kept := req[:0:0]
			for _, r := range req {
				name, _ := r.(string)
				if p, ok := props[name].(map[string]any); ok {
					if _, has := p["default"]; has {
						continue
					}
				}
				kept = append(kept, r)
			}
			switch {
			case len(kept) == 0:
				delete(v, "required")
			case len(kept) < len(req):
				v["required"] = kept
			}
		}
		for k, e := range v {
			if k == "default" || k == "const" || k == "enum" || k == "examples" {
				continue // values, not schemas
			}
			optionalDefaults(e)
		}
	case []any:
		for _, e := range v {
			optionalDefaults(e)
		}
	}
}

func knownDraft(v string) bool {
	for _, d := range []string{"draft-04", "draft-06", "draft-07"} {
		if strings.Contains(v, "json-schema.org/"+d+"/schema") {
			return true
		}
	}
	return false
}

// localRefs refuses references that leave the document.
func localRefs(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok {
				if k == "$ref" && !strings.HasPrefix(s, "#") {
					return fmt.Errorf("$ref %q points outside the schema", s)
				}
				if (k == "$id" || k == "id") && strings.Contains(s, "://") {
					return fmt.Errorf("%s %q sets a remote base for references", k, s)
				}
			}
			if err := localRefs(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := localRefs(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// Tool is one tool of an MCP server, as a registry.Tool.
type Tool struct {
	s      *Server
	name   string
	remote string
	desc   string
	params json.RawMessage
	ann    registry.Annotations
}

// annotations are what the server says of its tool rt, passed on as they
// are; hints it leaves out take MCP's defaults (not read-only, destructive,
// not idempotent, open world), and a tool without a title is shown by its
// name on the server.
func annotations(rt *mcp.Tool) registry.Annotations {
	a := registry.Annotations{Title: rt.Title, Destructive: true, OpenWorld: true}
	if h := rt.Annotations; h != nil {
		a.ReadOnly, a.Idempotent = h.ReadOnlyHint, h.IdempotentHint
		if h.DestructiveHint != nil {
			a.Destructive = *h.DestructiveHint
		}
		if h.OpenWorldHint != nil {
			a.OpenWorld = *h.OpenWorldHint
		}
		if a.Title == "" {
			a.Title = h.Title
		}
	}
	if a.Title == "" {
		a.Title = rt.Name
	}
	return a
}

// Annotations implements registry.Annotated.
func (t *Tool) Annotations() registry.Annotations { return t.ann }

// Name implements registry.Tool.
func (t *Tool) Name() string { return t.name }

// Remote returns the tool's name on the server.
func (t *Tool) Remote() string { return t.remote }

// Server returns the name of the tool's server.
func (t *Tool) Server() string { return t.s.name }

// Description implements registry.Tool.
func (t *Tool) Description() string { return t.desc }

// Parameters implements registry.Tool: the server's inputSchema.
func (t *Tool) Parameters() json.RawMessage { return t.params }

// Timeout implements registry.Timeouter: the entry's timeout, else the
// registry's default (0).
func (t *Tool) Timeout() time.Duration { return t.s.cfg.Timeout }

// Execute implements registry.Tool: the arguments, already checked
// against the schema, go to the server as they are. The tools of a
// per_key server are listed by its listing instance, which runs no call:
// each call goes to the calling key's own instance.
func (t *Tool) Execute(ctx context.Context, args json.RawMessage) (string, error) {
	s := t.s
	// Counted on the server the tool is listed by, so that a reload
	// drains the calls its keys' instances run too.
	s.begin()
	defer s.end()
	if s.keyed != nil {
		in, release, err := s.keyed.acquire(ctx)
		if err != nil {
			return "", err
		}
		defer release()
		s = in
	}
	return s.call(ctx, t, args)
}

// call runs one call of t on s.
func (s *Server) call(ctx context.Context, t *Tool, args json.RawMessage) (string, error) {
	c, err := s.await(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return "", s.ctxError(ctx)
		}
		var broken *brokenError
		if errors.As(err, &broken) {
			return "", toolerr.Errorf(toolerr.Unavailable, "the MCP server %s cannot start: %s. Next: use another tool; the operator must fix the server's entry.", s.name, s.redact(err.Error()))
		}
		if errors.Is(err, errClosed) {
			return "", toolerr.Errorf(toolerr.Unavailable, "the MCP server %s was stopped (the service is shutting down or reloading its tools). Next: retry in a moment.", s.name)
		}
		return "", toolerr.Errorf(toolerr.Unavailable, "the MCP server %s is not running: %s. It is restarted automatically. Next: retry in a while, or use another tool.", s.name, s.redact(err.Error()))
	}
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	params := &mcp.CallToolParams{Name: t.remote, Arguments: args}
	if registry.Streaming(ctx) {
		token := fmt.Sprintf("toolsvc-%d", s.token.Add(1))
		params.SetProgressToken(token)
		s.progress.Store(token, ctx)
		defer s.progress.Delete(token)
	}
	ctx, span := s.d.Tracer.StartMCPClient(ctx, tracing.MCPClientCall{Server: s.name, Tool: t.remote,
		Transport: s.transport(), ServerURL: s.cfg.URL, Arguments: args})
	params.Meta = s.d.Tracer.Inject(ctx, params.Meta)
	res, err := s.callOn(ctx, c, params)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			s.timedOut(c)
		} else if answered(err) {
			c.timeouts.Store(0)
		}
		var wire *jsonrpc.Error
		if errors.As(err, &wire) {
			span.EndMCPClient(err, wire.Code, false, "")
		} else {
			span.EndMCPClient(err, 0, false, "")
		}
		return "", s.callError(ctx, c, err)
	}
	c.timeouts.Store(0)
	out, err := s.result(ctx, t, res)
	span.EndMCPClient(nil, 0, res.IsError, out)
	return out, err
}

// transport is network.transport of the server's calls: pipe for a
// server on stdio, tcp for one over HTTP.
func (s *Server) transport() string {
	if s.cfg.URL != "" {
		return "tcp"
	}
	return "pipe"
}

// callOn sends the call over c and returns its answer, or ctx's end. The
// go-sdk client sends each call as it comes, over one stdio pipe or as
// its own HTTP request, and matches the answers by id, so a call never
// waits for another; but its write to a server that stopped reading its
// stdin blocks, whatever the call's context says, once the pipe is full.
// The call does not wait for that: it ends with its context, and the
// write is left to fail when the stuck server is restarted.
func (s *Server) callOn(ctx context.Context, c *conn, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := c.cs.CallTool(ctx, params)
		done <- answer{res, err}
	}()
	select {
	case a := <-done:
		return a.res, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// answered reports whether err is the server's answer (a JSON-RPC error)
// rather than no answer at all.
func answered(err error) bool {
	var wire *jsonrpc.Error
	return errors.As(err, &wire)
}

// maxTimeouts is how many calls in a row may get no answer within their
// timeout before the server is taken for stuck and restarted, even if it
// answers pings: a server whose every call hangs serves nobody.
const maxTimeouts = 3

// timedOut takes note of a call over c that got no answer within its
// timeout. Such a call may just be slow; but a server that no longer
// answers at all would have every later call wait out its whole timeout
// too. So it is asked a ping, bounded by PingTimeout, and restarted when
// that gets no answer either, or when maxTimeouts calls in a row timed
// out.
func (s *Server) timedOut(c *conn) {
	if n := c.timeouts.Add(1); n >= maxTimeouts {
		s.restart(c, fmt.Sprintf("%d calls in a row got no answer within their timeout", n))
		return
	}
	if !c.pinging.CompareAndSwap(false, true) {
		return // a ping is waiting already
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.pinging.Store(false)
		return
	}
	// Added under the lock Close takes before it waits.
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer c.pinging.Store(false)
		if err := s.ping(c); err != nil && s.life.Err() == nil && !c.ended() {
			s.restart(c, fmt.Sprintf("a call got no answer within its timeout, and a ping none within %s", s.d.PingTimeout))
		}
	}()
}

// ping asks the server over c for a ping's answer within PingTimeout. An
// error answer (a server that does not know ping) is an answer.
func (s *Server) ping(c *conn) error {
	ctx, cancel := context.WithTimeout(s.life, s.d.PingTimeout)
	defer cancel()
	done := make(chan error, 1)
	// As for a call, the ping's write may block on a server that stopped
	// reading: the wait ends with ctx anyway.
	go func() { done <- c.cs.Ping(ctx, nil) }()
	select {
	case err := <-done:
		if err == nil || answered(err) {
			return nil
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// restart takes c out of use and kills the server's process, if it is
// still the current connection: the restart loop starts a new one after
// the backoff, and calls wait for it. Calls still running on c end with
// an error saying the server is being restarted.
func (s *Server) restart(c *conn, why string) {
	s.mu.Lock()
	current := s.conn == c
	if current {
		s.conn = nil
		s.status = fmt.Errorf("MCP server %s: restarting: %s", s.name, why)
		s.signalLocked()
	}
	s.mu.Unlock()
	if !current {
		return
	}
	s.log.Warn().Str("reason", why).Msg("mcp server: not answering; restarting it")
	// The calls still running on c are told why it ended.
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("MCP server %s: it stopped answering (%s), so it was stopped", s.name, why)
	}
	c.mu.Unlock()
	go c.abort()
}

// callError turns a failed call into an error a model can act on.
func (s *Server) callError(ctx context.Context, c *conn, err error) error {
	if ctx.Err() != nil {
		return s.ctxError(ctx)
	}
	var wire *jsonrpc.Error
	if errors.As(err, &wire) {
		return toolerr.Errorf(toolerr.ToolError, "the MCP server %s refused the call: %s (JSON-RPC error %d). Next: check the arguments against the tool's description, or use another tool.", s.name, s.redact(wire.Message), wire.Code)
	}
	if c.httpOver.Swap(false) {
		// The sdk may or may not end the connection after a body it could
		// not read; it is replaced in either case, so that the next call
		// does not meet a connection that is failing.
		s.detach(c, errors.New("a response was larger than the bound on one message"))
		return toolerr.Errorf(toolerr.ToolError, "the MCP server %s sent a response larger than %d bytes, the bound on one message; it was not read. Next: ask for less at a time (a narrower query, a smaller page or file).", s.name, s.d.MaxMessage)
	}
	// The connection failed: wait a moment for it to be seen ended, to
	// say why.
	t := time.NewTimer(stopGrace + time.Second)
	defer t.Stop()
	select {
	case <-c.done:
		why := c.why().Error()
		if c.limit != nil && c.limit.over.Load() {
			return toolerr.Errorf(toolerr.ToolError, "%s. Next: ask for less at a time (a narrower query, a smaller page or file).", s.redact(why))
		}
		return toolerr.Errorf(toolerr.Unavailable, "%s. It is being restarted. Next: retry the call; if it fails the same way again, the call itself may crash the server, so try other arguments or another tool.", s.redact(why))
	case <-t.C:
	}
	return toolerr.Errorf(toolerr.ToolError, "the call to the MCP server %s failed: %s. Next: retry, or use another tool.", s.name, s.redact(err.Error()))
}

func (s *Server) ctxError(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return toolerr.Errorf(toolerr.Timeout, "the MCP server %s did not answer in time; the call was canceled. Next: retry with a smaller request, or use another tool.", s.name)
	}
	return toolerr.Errorf(toolerr.Canceled, "the call to the MCP server %s was canceled (the client went away or the service is shutting down).", s.name)
}

var _ registry.Tool = (*Tool)(nil)
var _ registry.Timeouter = (*Tool)(nil)

// Package registry holds the tools a service offers, describes them to models
// in OpenAI's function-calling format, and runs calls: validation, deadline,
// panic recovery and the audit record around every call. It knows nothing of
// HTTP or of any particular tool.
package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"github.com/xeipuuv/gojsonschema"

	"github.com/countbot/toolsvc/internal/audit"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/tracing"
)

// Tool is one capability offered to a model.
type Tool interface {
	Name() string
	// Description is written for a model: what the tool does and when to use it.
	Description() string
	// Parameters is a JSON Schema with "type": "object".
	Parameters() json.RawMessage
	// Execute runs the tool on arguments that have passed the schema. A
	// returned error becomes an error result; a *toolerr.Error in its
	// chain gives the result its code and message.
	Execute(ctx context.Context, args json.RawMessage) (string, error)
}

// Timeouter is implemented by tools that need a deadline other than the
// registry's default, such as exec with its own per-call timeout.
type Timeouter interface {
	Timeout() time.Duration
}

// MalformedHinter is implemented by tools that have advice to add when a
// model's arguments arrive truncated (write_file: write in chunks).
type MalformedHinter interface {
	MalformedHint() string
}

// AuditLog records every call: Start before the tool runs (the record has
// no outcome yet), Finish with the outcome. Both must be safe for
// concurrent use. An error from Start means the call left no trace; an
// error from Finish means its final record is not where readers look.
type AuditLog interface {
	Start(audit.Record) (audit.Started, error)
	Finish(audit.Started, audit.Record) error
}

// Options configure a Registry. Zero values get sensible defaults.
type Options struct {
	Audit AuditLog // nil: no audit log
	// AuditFailOpen runs calls whose start the audit log could not record
	// and returns results whose final record it could not write, as if it
	// had; the faults are only logged. By default (false) the first kind
	// of call is refused and the second answered with an audit_failed
	// error that carries the result.
	AuditFailOpen  bool
	Log            zerolog.Logger // tool panics and audit failures
	DefaultTimeout time.Duration  // per call, unless the tool is a Timeouter; default 2 min
	NewID          func() string  // default UUID v4
	Now            func() time.Time
	// Redact removes secrets from text that leaves the service (results and
	// audit records). Default: identity.
	Redact func(string) string
	// RedactProgress wraps a progress listener so that no secret reaches
	// it, even split across events; flush sends what it held back and is
	// called when the tool returns. Default: each event through Redact.
	RedactProgress func(fn func(event, data string)) (send func(event, data string), flush func())
	// Observer is told of every call and audit fault, for metrics. Nil:
	// nobody is told.
	Observer Observer
	// Policy decides, by the caller's key name, the tools each key may
	// call and see, and when its calls may start. Nil: every key calls
	// every tool, unlimited.
	Policy Policy
	// Tracer gives every call a span, execute_tool {tool}, the child of
	// the door's span in the call's context, and the audit record its
	// trace and span IDs. Nil: no spans, and nothing more per call.
	Tracer *tracing.Tracer
}

// Observer watches calls from outside, so that metrics need no import
// here. Its methods are called on the call's goroutine, must be quick and
// safe for concurrent use. A name that is not registered is reported as
// UnknownToolLabel, so that names a model invents cannot grow the set of
// labels without bound.
type Observer interface {
	// CallStarted is called when a call begins, before its audit record.
	CallStarted(tool string)
	// CallEnded is called once per CallStarted with the result's status,
	// its error code ("" on success) and the call's duration.
	CallEnded(tool, status, code string, d time.Duration)
	// AuditFailed is called when the audit log cannot record a call's
	// start ("start") or its final record ("finish").
	AuditFailed(stage string)
	// CallRefused is called when the Policy refused a call before it ran,
	// with the key's name and why: "denied", or the Policy's reason
	// ("rate", "concurrency").
	CallRefused(key, reason string)
}

// UnknownToolLabel stands for every name that is not registered in what
// an Observer is told.
const UnknownToolLabel = "_unknown"

type nopObserver struct{}

func (nopObserver) CallStarted(string)                              {}
func (nopObserver) CallEnded(string, string, string, time.Duration) {}
func (nopObserver) AuditFailed(string)                              {}
func (nopObserver) CallRefused(string, string)                      {}

// Status values of a Result.
const (
	StatusSuccess = "success"
	StatusError   = "error"
)

// Result is the outcome of one call, as returned to the caller.
type Result struct {
	CallID string     `json:"call_id"`
	Tool   string     `json:"tool"`
	Status string     `json:"status"`
	Result string     `json:"result"`
	Error  *ErrorBody `json:"error,omitempty"`
	// ExitCode is the exit status of the command a successful call ran
	// (exec): a command that ran is a success whatever its status, which
	// is here for the caller and in the text for the model. Absent for
	// tools that run no command.
	ExitCode   *int  `json:"exit_code,omitempty"`
	DurationMS int64 `json:"duration_ms"`
	// RetryAfter is, for a call the Policy held back (rate_limited), how
	// long to wait before a retry can pass; the doors that have a way to
	// say it (Retry-After, a JSON-RPC error) say it.
	RetryAfter time.Duration `json:"-"`
	// A call held for a person's approval (status approval_required):
	// the approval's ID, the hash of the canonical arguments it is bound
	// to, what the call will do in words, and when the approval lapses.
	ApprovalID      string     `json:"approval_id,omitempty"`
	ArgumentsSHA256 string     `json:"arguments_sha256,omitempty"`
	Summary         string     `json:"summary,omitempty"`
	ExpiresAt       *time.Time `json:"expires_at,omitempty"`
	// approval is what the audit record says of the call's approval.
	approval *audit.Approval
}

// ErrorBody is the machine-readable part of an error result.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Definition is a tool in OpenAI function-calling format, with its
// annotations for the doors that carry them (MCP).
type Definition struct {
	Type        string         `json:"type"`
	Function    FunctionSchema `json:"function"`
	Annotations Annotations    `json:"-"`
}

// FunctionSchema is the "function" member of a Definition.
type FunctionSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type entry struct {
	tool   Tool
	set    string // the set ReplaceSet manages it in; "" for Register's tools
	schema *gojsonschema.Schema
	// fast checks the arguments ahead of schema when the schema is simple
	// enough; nil otherwise.
	fast  *fastSchema
	def   Definition
	defJS []byte
	rules []Rule
	// shortenAt is where the checks may cut long strings of big
	// arguments (see checkValue); 0: never.
	shortenAt int
	// nulls are where a null stands for a parameter left out.
	nulls *nulls
	// example is a short arguments object, for the advice given when the
	// arguments are not an object at all.
	example string
	// pending: the tool is the Fallback's, for a name no registered tool
	// has: callable, but listed nowhere and without a definition.
	pending bool
}

// Registry is safe for concurrent use. Tools are registered at start-up;
// named sets of them (tools from a file) can be replaced later, at once,
// with ReplaceSet.
type Registry struct {
	opts Options

	mu      sync.RWMutex
	tools   map[string]*entry
	allDefs []byte // cached JSON array of every definition, sorted by name
	// gen counts the changes of the set of tools (see Generation).
	gen uint64
	// keyDefs caches DefinitionsJSONFor of the keys that see some tools
	// only, each with the generation it was built for.
	keyDefs map[string]keyDefs

	// hooks, set by tests only, are told of look-ups and readings.
	hooks *hooks

	// fallback answers for names no registered tool has (SetFallback);
	// pendingTmpl is the entry its tools are made from.
	fallback atomic.Pointer[Fallback]
	// holder is asked before each call runs (SetHolder); nil: none.
	holder      atomic.Pointer[holderBox]
	pendingOnce sync.Once
	pendingTmpl *entry
}

var namePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(NamePattern) })

// New returns an empty registry.
func New(opts Options) *Registry {
	if opts.DefaultTimeout <= 0 {
		opts.DefaultTimeout = 2 * time.Minute
	}
	if opts.NewID == nil {
		opts.NewID = func() string { return uuid.NewString() }
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Redact == nil {
		opts.Redact = func(s string) string { return s }
	}
	if opts.RedactProgress == nil {
		redact := opts.Redact
		opts.RedactProgress = func(fn func(event, data string)) (func(event, data string), func()) {
			if fn == nil {
				return nil, func() {}
			}
			return func(event, data string) { fn(event, redact(data)) }, func() {}
		}
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	return &Registry{opts: opts, tools: make(map[string]*entry)}
}

// Register adds t. It fails on an invalid name, a duplicate name or a
// parameters schema that does not compile; start-up should stop then.
func (r *Registry) Register(t Tool) error {
	e, err := newEntry(t, "")
	if err != nil {
		return err
	}
	return r.add(e)
}

func (r *Registry) add(e *entry) error {
	t := e.tool
	name := t.Name()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[name]; dup {
		return fmt.Errorf("register tool %q: a tool with that name is already registered", name)
	}
	r.tools[name] = e
	r.changedLocked()
	return nil
}

// newEntry checks t's name and compiles its schema and definition, for
// the set named set ("" for tools added one by one with Register).
func newEntry(t Tool, set string) (*entry, error) {
	name := t.Name()
	if !namePattern().MatchString(name) {
		return nil, fmt.Errorf("register tool %q: name must match %s", name, NamePattern)
	}
	params := t.Parameters()
	schema, err := compileSchema(params)
	if err != nil {
		return nil, fmt.Errorf("register tool %q: invalid parameters schema: %w", name, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, params); err != nil {
		return nil, fmt.Errorf("register tool %q: %w", name, err)
	}
	desc := t.Description()
	var rules []Rule
	if rt, ok := t.(Ruled); ok {
		rules = rt.Rules()
		desc += " " + describeRules(rules)
	}
	def := Definition{Type: "function", Function: FunctionSchema{
		Name: name, Description: desc, Parameters: compact.Bytes(),
	}}
	if at, ok := t.(Annotated); ok {
		def.Annotations = at.Annotations()
	}
	defJS, err := json.Marshal(def)
	if err != nil {
		return nil, fmt.Errorf("register tool %q: %w", name, err)
	}
	return &entry{tool: t, set: set, schema: schema, fast: compileFast(params), def: def, defJS: defJS, rules: rules,
		shortenAt: shortenAt(params, rules), nulls: newNulls(params), example: exampleArgs(params, rules)}, nil
}

// Names returns the registered tool names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.tools))
	for n := range r.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// lookup returns the entry registered under name, or nil; with
// fallback, the entry of the Fallback's tool for a name no registered
// tool has. Every look-up of a tool by name goes through here.
func (r *Registry) lookup(name string, fallback bool) *entry {
	if r.hooks != nil && r.hooks.lookup != nil {
		r.hooks.lookup(name)
	}
	r.mu.RLock()
	e := r.tools[name]
	r.mu.RUnlock()
	if e == nil && fallback {
		return r.fallbackEntry(name)
	}
	return e
}

// Tool returns the tool registered under name.
func (r *Registry) Tool(name string) (Tool, bool) {
	e := r.lookup(name, false)
	if e == nil {
		return nil, false
	}
	return e.tool, true
}

// Target is a tool as one look-up of its name found it, or found nothing.
// A door looks the tool up once (Find) and hands the Target on, so that
// whether the tool exists, its deadline and the call itself are answered
// by that one look-up, and agree even when the set of tools changes
// meanwhile.
type Target struct {
	name string
	e    *entry
	// denied: a tool is registered under the name, but the caller's key
	// may not call it (FindFor); e is nil, so that it is treated as
	// unknown everywhere.
	denied bool
	// timeout is the registry's default, for a tool without its own.
	timeout time.Duration
}

// Find looks the named tool up. The Target of a name that is not
// registered is not Found, unless the Fallback gives a tool for it;
// invoking it gives the unknown_tool result.
func (r *Registry) Find(name string) Target {
	return Target{name: name, e: r.lookup(name, true), timeout: r.opts.DefaultTimeout}
}

// Fallback gives a tool for a name no registered tool has, or nil. The
// MCP servers' mount is one: a server that has not listed its tools yet
// cannot say which names it will have, so a call of "<server>__<tool>"
// is answered by a tool that says the server is starting, instead of as
// an unknown tool. It is asked only after a look-up found nothing, so
// that the look-up of a registered tool costs nothing more; it must be
// safe for concurrent use and quick.
type Fallback func(name string) Tool

// SetFallback sets the Fallback (nil: none). Its tools are found (Find,
// FindFor, Invoke) and called like registered tools, the policy deciding
// them by name as it does any tool, but they are listed nowhere (Names,
// Definitions, DefinitionJSON, DefinitionJSONFor): they are no tools the
// registry knows. Their arguments need only be a JSON object.
func (r *Registry) SetFallback(f Fallback) {
	if f == nil {
		r.fallback.Store(nil)
		return
	}
	r.fallback.Store(&f)
}

// pendingParams are the parameters of a Fallback's tool: any object.
const pendingParams = `{"type":"object"}`

// fallbackEntry returns the entry of the Fallback's tool for name, or nil.
func (r *Registry) fallbackEntry(name string) *entry {
	f := r.fallback.Load()
	if f == nil {
		return nil
	}
	// The name is checked once the Fallback takes it: most misses are
	// names it does not take, and it is quicker than the pattern.
	t := (*f)(name)
	if t == nil || !namePattern().MatchString(name) {
		return nil
	}
	r.pendingOnce.Do(func() {
		// A schema that is a constant and compiles: cannot fail.
		r.pendingTmpl, _ = newEntry(pendingStub{}, "")
	})
	e := *r.pendingTmpl
	e.tool, e.pending = t, true
	return &e
}

// pendingStub is the tool the Fallback's entries are made from.
type pendingStub struct{}

func (pendingStub) Name() string                { return "pending" }
func (pendingStub) Description() string         { return "" }
func (pendingStub) Parameters() json.RawMessage { return json.RawMessage(pendingParams) }
func (pendingStub) Execute(context.Context, json.RawMessage) (string, error) {
	return "", nil
}

// Found reports whether a tool was registered under the name.
func (t Target) Found() bool { return t.e != nil }

// Name returns the name looked up.
func (t Target) Name() string { return t.name }

// Pending reports whether the tool is the Fallback's: found and callable,
// but in no listing, so a door that answers from its own list of tools
// must send its calls here.
func (t Target) Pending() bool { return t.e != nil && t.e.pending }

// Timeout returns how long a call of the tool may run: the tool's own
// timeout (Timeouter) or the registry's default. A caller that makes a
// cancelable context for the call anyway (the HTTP doors) can give it
// this deadline; Invoke then adds no deadline of its own.
func (t Target) Timeout() time.Duration {
	if t.e != nil {
		if tt, ok := t.e.tool.(Timeouter); ok {
			if d := tt.Timeout(); d > 0 {
				return d
			}
		}
	}
	return t.timeout
}

// Has reports whether a tool of that name is registered.
func (r *Registry) Has(name string) bool {
	_, ok := r.Tool(name)
	return ok
}

// Definitions returns every tool's definition, sorted by name.
func (r *Registry) Definitions() []Definition {
	r.mu.RLock()
	defer r.mu.RUnlock()
	defs := make([]Definition, 0, len(r.tools))
	for _, n := range r.namesLocked() {
		defs = append(defs, r.tools[n].def)
	}
	return defs
}

// DefinitionsJSON returns Definitions as a JSON array. The bytes are the
// same on every call until the set of tools changes, so model prompt
// caches keyed on them keep working. The caller must not modify them.
func (r *Registry) DefinitionsJSON() []byte {
	r.mu.RLock()
	cached := r.allDefs
	r.mu.RUnlock()
	if cached != nil {
		return cached
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.allDefs == nil {
		var b bytes.Buffer
		b.WriteByte('[')
		for i, n := range r.namesLocked() {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(r.tools[n].defJS)
		}
		b.WriteByte(']')
		r.allDefs = b.Bytes()
	}
	return r.allDefs
}

// DefinitionJSON returns one tool's definition as JSON.
func (r *Registry) DefinitionJSON(name string) ([]byte, bool) {
	e := r.lookup(name, false)
	if e == nil {
		return nil, false
	}
	return e.defJS, true
}

func (r *Registry) namesLocked() []string {
	names := make([]string, 0, len(r.tools))
	for n := range r.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Timeout returns how long a call of the named tool may run; see
// Target.Timeout, which a door that has looked the tool up uses instead.
func (r *Registry) Timeout(name string) time.Duration {
	return r.Find(name).Timeout()
}

// Invoke runs one call of the named tool with the model's raw arguments,
// for the key meta names (see FindFor). It never panics and never fails:
// every outcome, including an unknown tool, a tool the key may not call,
// malformed arguments, a timeout or a panic in the tool, is a Result.
func (r *Registry) Invoke(ctx context.Context, name string, args []byte, meta Meta) Result {
	return r.InvokeTarget(ctx, r.FindFor(meta.Key, name), args, meta)
}

// InvokeTarget is Invoke of the tool t found, without looking it up again:
// Admit, then InvokeAdmitted, or the Policy's refusal.
func (r *Registry) InvokeTarget(ctx context.Context, t Target, args []byte, meta Meta) Result {
	a, refused, ok := r.Admit(t, meta)
	if !ok {
		return refused
	}
	return r.InvokeAdmitted(ctx, a, args)
}

// InvokeAdmitted runs the call Admit let through, and then ends its
// admission. Every Admission Admit gives must come here.
func (r *Registry) InvokeAdmitted(ctx context.Context, a Admission, args []byte) Result {
	// The span ID is the call's own span's, never the caller's.
	a.meta.SpanID = ""
	if r.opts.Tracer == nil {
		return r.invokeAdmitted(ctx, a, args)
	}
	return r.invokeTraced(ctx, a, args)
}

// invokeTraced runs the call in its span: the span is started before the
// audit record, which names it (the facts' TraceID and SpanID), and ended
// with the result, a failed call's with error.type tool_error.
func (r *Registry) invokeTraced(ctx context.Context, a Admission, args []byte) Result {
	name := a.t.name
	if a.t.e == nil {
		name = runes.Shorten(name, runes.Echo)
	}
	ctx, span := r.opts.Tracer.StartTool(ctx, name)
	if traceID, spanID := span.IDs(); spanID != "" {
		a.meta.TraceID, a.meta.SpanID = traceID, spanID
	}
	res := r.invokeAdmitted(ctx, a, args)
	end := tracing.ToolEnd{CallID: res.CallID, Result: res.Result}
	if res.Error != nil {
		end.ErrorCode = res.Error.Code
	}
	if span.Recording() && r.opts.Tracer.CapturesContent() {
		end.Arguments = func() string {
			if len(args) == 0 {
				return "{}"
			}
			return r.opts.Redact(string(args))
		}
	}
	span.EndTool(end)
	return res
}

// invokeAdmitted is InvokeAdmitted without a span.
func (r *Registry) invokeAdmitted(ctx context.Context, a Admission, args []byte) (res Result) {
	if a.held {
		defer r.opts.Policy.Release(a.meta.Key)
	}
	t, meta := a.t, a.meta
	start := r.opts.Now()
	name, e := t.name, t.e
	label := name
	if e == nil || e.pending {
		// A Fallback's tool is no registered tool either: its names are
		// the caller's.
		label = UnknownToolLabel
		// No tool has a long name: the result, audit and log carry the
		// start of it only.
		name = runes.Shorten(name, runes.Echo)
	}
	r.opts.Observer.CallStarted(label)
	defer func() {
		code := ""
		if res.Error != nil {
			code = res.Error.Code
		}
		r.opts.Observer.CallEnded(label, res.Status, code, r.opts.Now().Sub(start))
	}()
	// The facts are the caller's text and reach the audit record and the
	// tool's context: a key pasted there must not be recorded.
	meta = meta.Clean(r.opts.Redact)
	call := Call{ID: r.opts.NewID(), Tool: name, Facts: meta}
	if len(args) == 0 {
		args = []byte("{}")
	}
	// The arguments are read once, for the checks and the audit record.
	rd := r.read(e, args)
	if r.opts.Audit == nil {
		res = r.run(ctx, e, call, &rd)
		res.DurationMS = r.opts.Now().Sub(start).Milliseconds()
		return res
	}
	rec := audit.Record{CallID: call.ID, ToolName: name, Facts: meta, Timestamp: start.UTC()}
	rec.Arguments = r.auditArguments(&rd)
	started, err := r.opts.Audit.Start(rec)
	if err != nil {
		r.opts.Observer.AuditFailed("start")
		r.opts.Log.Error().Err(err).Str("call_id", call.ID).Str("tool", name).Str("key", call.Key).Bool("ran", r.opts.AuditFailOpen).
			Msg("audit log cannot record the call's start")
		if !r.opts.AuditFailOpen {
			res := Failed(name, toolerr.AuditUnavailable, auditUnavailableMsg)
			res.CallID = call.ID
			return res
		}
	}

	res = r.run(ctx, e, call, &rd)
	res.DurationMS = r.opts.Now().Sub(start).Milliseconds()

	rec.Status = res.Status
	rec.Approval = res.approval
	rec.DurationMS = res.DurationMS
	rec.Result = res.Result
	if res.Error != nil {
		rec.ErrorCode = res.Error.Code
	}
	if err := r.opts.Audit.Finish(started, rec); err != nil {
		r.opts.Observer.AuditFailed("finish")
		r.opts.Log.Error().Err(err).Str("call_id", call.ID).Str("tool", name).Str("key", call.Key).
			Msg("audit log cannot write the call's final record")
		if !r.opts.AuditFailOpen {
			// The tool has run: its result goes back, so nothing it did is
			// hidden, but as an error, so nobody takes the call for audited.
			failed := Failed(name, toolerr.AuditFailed, auditFailedMsg)
			res.Status, res.Error = failed.Status, failed.Error
			res.Result = failed.Result + "\n\n" + res.Result
		}
	}
	return res
}

// auditArguments are the arguments as the audit log gets them: redacted,
// as raw JSON when they are JSON, else as text, and with what their one
// reading found when redaction left them as they were, so that the log
// does not read them again. Arguments without a secret (the rule) are not
// copied: a 50 MB write_file would otherwise hold its content twice more
// for the whole call. The arguments are never changed.
func (r *Registry) auditArguments(rd *reading) any {
	args := rd.raw
	view := unsafe.String(unsafe.SliceData(args), len(args))
	red := r.opts.Redact(view)
	same := unsafe.StringData(red) == unsafe.StringData(view) && len(red) == len(view)
	switch {
	case same && rd.whole:
		return audit.ReadArguments{JSON: args, Compact: rd.compact, Value: rd.value, SecretNames: rd.secretNames}
	case same && rd.valid:
		return json.RawMessage(args)
	case rd.valid:
		return json.RawMessage(red)
	}
	return strings.Clone(red)
}

const (
	auditUnavailableMsg = "the call was not run: the service's audit log cannot record it (its disk may be full or read-only). Next: try again later; if it keeps failing, tell the user the tool service needs its operator."
	auditFailedMsg      = "the call ran, but the service's audit log could not write its final record, so it is reported as an error. Its result follows; the operator has been told. Next: do not repeat the call because of this error: what it did is done."
)

// run runs the call of e, the tool registered under call.Tool when the
// call began (nil: none), with the arguments rd read.
func (r *Registry) run(ctx context.Context, e *entry, call Call, rd *reading) Result {
	res := Result{CallID: call.ID, Tool: call.Tool, Status: StatusSuccess}
	// ap is the approval the call runs under, if it needed one: its
	// record says so whatever the call's outcome.
	var ap *audit.Approval
	fail := func(code, msg string) Result {
		failed := Failed(call.Tool, code, r.opts.Redact(msg))
		failed.CallID = call.ID
		failed.approval = ap
		return failed
	}

	if e == nil {
		return fail(toolerr.UnknownTool, r.UnknownToolMessageFor(call.Key, call.Tool))
	}

	var args []byte
	var code, msg string
	if rd.whole {
		args, code, msg = checkDecoded(e, call.Tool, rd.raw, rd.raw, rd.value, false)
	} else {
		r.countRead() // and more: the checks read them their own way
		args, code, msg = checkValidity(e, call.Tool, rd.raw, rd.valid)
	}
	if code != "" {
		return fail(code, msg)
	}
	held, granted, ok := r.hold(ctx, e, call, args)
	if !ok {
		return held
	}
	ap, res.approval = granted, granted

	timeout := Target{e: e, timeout: r.opts.DefaultTimeout}.Timeout()
	// A caller that already gave the call this deadline or an earlier one
	// (the HTTP doors, see Timeout) spares it a second context and timer.
	if dl, ok := ctx.Deadline(); !ok || dl.After(time.Now().Add(timeout)) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	// The caller's listener (WithProgress) gets the tool's events through
	// the redaction; so does an enclosing call's, for a call a tool makes.
	listener, _ := ctx.Value(progressKey{}).(func(event, data string))
	ctx, facts := withCall(ctx, call)
	progress, flush := r.opts.RedactProgress(listener)
	// Once the tool has returned, its result follows: an event a stray
	// goroutine sends later is dropped, not written after the result.
	if send := progress; send != nil {
		progress = func(event, data string) {
			if !facts.ended.Load() {
				send(event, data)
			}
		}
	}
	defer func() {
		facts.ended.Store(true)
		flush()
	}()
	ctx = WithProgress(ctx, progress)

	out, err := r.execute(ctx, e.tool, args)
	if err == nil {
		res.Result = r.opts.Redact(out)
		res.ExitCode = facts.exitCode.Load()
		return res
	}
	return fail(failure(ctx, call.Tool, err, timeout))
}

// failure is the code and message of a call of tool that returned err,
// its context being ctx and its deadline timeout.
func failure(ctx context.Context, tool string, err error, timeout time.Duration) (code, msg string) {
	var ae *argumentsError
	if errors.As(err, &ae) {
		return toolerr.InvalidArguments, formatProblems(tool, ae.problems, 0)
	}
	// A tool's own code wins, except a generic failure while the call was
	// being stopped: that is the stop, not the tool.
	var te *toolerr.Error
	if errors.As(err, &te) && (te.Code != toolerr.ToolError || ctx.Err() == nil) {
		return te.Code, err.Error()
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return toolerr.Timeout, fmt.Sprintf("Tool '%s' did not finish within %s and was stopped. Next: try a smaller piece of work.", tool, timeout)
	case ctx.Err() != nil:
		return toolerr.Canceled, fmt.Sprintf("Tool '%s' was canceled before it finished (the client went away or the service is shutting down).", tool)
	}
	return toolerr.ToolError, fmt.Sprintf("Error executing %s: %v", tool, err)
}

// execute runs the tool, turning a panic into an error.
func (r *Registry) execute(ctx context.Context, t Tool, args []byte) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			call, _ := CallFrom(ctx)
			r.opts.Log.Error().Str("tool", t.Name()).Str("call_id", call.ID).Str("key", call.Key).
				Str("panic", fmt.Sprint(p)).Msg("tool panicked")
			out, err = "", toolerr.Errorf(toolerr.ToolError, "Error executing %s: internal failure in the tool (call %s). Next: try again or use another approach; the operator can find the details in the service log.", t.Name(), call.ID)
		}
	}()
	return t.Execute(ctx, args)
}

// Failed is the Result of a call of tool that failed with code and msg. It
// is the one place an error result's text gets its "Error: " prefix; msg,
// like every toolerr message, has none.
func Failed(tool, code, msg string) Result {
	return Result{Tool: tool, Status: StatusError, Result: "Error: " + msg, Error: &ErrorBody{Code: code, Message: msg}}
}

// UnknownToolMessage is what a caller is told when it names a tool that is
// not registered, whether in a call (a Result) or over HTTP (a 404), or one
// it may not use (a sub-agent). Given the names of the tools the caller may
// use, it lists them.
func UnknownToolMessage(name string, available ...string) string {
	name = runes.Shorten(name, runes.Echo)
	if len(available) == 0 {
		return fmt.Sprintf("Tool '%s' not found. Please use only the tools provided in the tool definitions.", name)
	}
	return fmt.Sprintf("Tool '%s' not found. Please use only the tools provided in the tool definitions: %s.", name, strings.Join(available, ", "))
}

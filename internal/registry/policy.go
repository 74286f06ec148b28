package registry

import (
	"bytes"
	"fmt"
	"time"

	"github.com/countbot/toolsvc/internal/audit"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// Policy decides what each key may do, by its name (callinfo.Facts.Key):
// policy.Enforcer. Every method must be cheap, allocate nothing and be
// safe for concurrent use: it is asked on every call and every listing.
type Policy interface {
	// Allows reports whether the key may call, and see, the tool.
	Allows(key, tool string) bool
	// SeesAll reports whether the key may call every tool.
	SeesAll(key string) bool
	// Admit lets one call of the key start, or says why not and how long
	// to wait; a call let through is ended with Release.
	Admit(key string) (wait time.Duration, reason string)
	Release(key string)
	// Folder is the key's own folder, relative to the workspace ("": the
	// whole workspace), which the call's tools take as their root.
	Folder(key string) string
	// Generation changes whenever the rules change.
	Generation() uint64
}

// The audit record's Decision of a call the Policy refused.
const (
	DecisionDenied      = "denied"
	DecisionRateLimited = "rate_limited"
)

// reasonDenied is the Observer's reason for a tool the key may not call.
const reasonDenied = "denied"

// FindFor looks the named tool up for the key named key: a tool the key
// may not call is not Found, exactly as a name no tool has, so that every
// door answers it as an unknown tool; Denied tells the two apart for the
// audit record.
func (r *Registry) FindFor(key, name string) Target {
	t := r.Find(name)
	if t.e != nil && r.opts.Policy != nil && !r.opts.Policy.Allows(key, name) {
		t.e, t.denied = nil, true
	}
	return t
}

// Denied reports whether a tool has the name but the key may not call it.
func (t Target) Denied() bool { return t.denied }

// Admission is a call the Policy let start: InvokeAdmitted runs it and
// ends it. Its zero value is no admission.
type Admission struct {
	t    Target
	meta Meta
	// held: the Policy counts the call as running until it ends.
	held bool
}

// Admit asks the Policy whether the call of t for meta's key may start
// now. A tool the key may not call is refused with the unknown tool's
// result, a key over its rate or its calls at once with a rate_limited
// one whose RetryAfter says how long to wait; either refusal is recorded
// in the audit log with its decision, and nothing runs. A call let
// through must be run with InvokeAdmitted. A name no tool has is let
// through: running it gives the unknown tool's result, as ever.
func (r *Registry) Admit(t Target, meta Meta) (a Admission, refused Result, ok bool) {
	p := r.opts.Policy
	// The folder is the policy's, never the caller's: it is set here,
	// over whatever the caller's facts held.
	meta.Workspace = ""
	if p == nil {
		return Admission{t: t, meta: meta}, Result{}, true
	}
	if t.e != nil && !p.Allows(meta.Key, t.name) {
		t.e, t.denied = nil, true // the policy changed since the look-up
	}
	if t.denied {
		return Admission{}, r.refuse(t.name, meta, DecisionDenied, reasonDenied, 0), false
	}
	if t.e == nil {
		return Admission{t: t, meta: meta}, Result{}, true
	}
	if wait, reason := p.Admit(meta.Key); reason != "" {
		return Admission{}, r.refuse(t.name, meta, DecisionRateLimited, reason, wait), false
	}
	meta.Workspace = p.Folder(meta.Key)
	return Admission{t: t, meta: meta, held: true}, Result{}, true
}

// refuse is the result of a call the Policy refused, recorded in the
// audit log (when there is one) with the decision and the key's name.
func (r *Registry) refuse(name string, meta Meta, decision, reason string, wait time.Duration) Result {
	r.opts.Observer.CallRefused(meta.Key, reason)
	var res Result
	if decision == DecisionDenied {
		res = Failed(name, toolerr.UnknownTool, r.UnknownToolMessageFor(meta.Key, name))
	} else {
		res = Failed(name, toolerr.RateLimited, rateLimitedMessage(meta.Key, reason, wait))
		res.RetryAfter = wait
	}
	res.CallID = r.opts.NewID()
	if r.opts.Audit == nil {
		return res
	}
	meta = meta.Clean(r.opts.Redact)
	rec := audit.Record{CallID: res.CallID, ToolName: name, Facts: meta, Timestamp: r.opts.Now().UTC()}
	started, err := r.opts.Audit.Start(rec)
	if err == nil {
		rec.Status, rec.Result, rec.ErrorCode, rec.Decision = res.Status, res.Result, res.Error.Code, decision
		err = r.opts.Audit.Finish(started, rec)
	}
	if err != nil {
		r.opts.Log.Error().Err(err).Str("call_id", res.CallID).Str("tool", name).Str("key", meta.Key).Str("decision", decision).
			Msg("audit log cannot record a call the key policy refused")
	}
	return res
}

// RetrySeconds is wait in whole seconds, rounded up, at least 1: what a
// Retry-After header and a model are told.
func RetrySeconds(wait time.Duration) int64 {
	s := int64((wait + time.Second - 1) / time.Second)
	return max(s, 1)
}

func rateLimitedMessage(key, reason string, wait time.Duration) string {
	what := "is over the rate of calls its policy allows"
	if reason == "concurrency" {
		what = "already runs as many calls at once as its policy allows"
	}
	return fmt.Sprintf("the call was not run: the API key %q %s. Next: wait %d seconds, then make the call again.", key, what, RetrySeconds(wait))
}

// keyDefs is DefinitionsJSONFor of one key, for one generation.
type keyDefs struct {
	gen  uint64
	defs []byte
}

// DefinitionsFor returns the definitions of the tools the key named key
// may call, sorted by name.
func (r *Registry) DefinitionsFor(key string) []Definition {
	_, defs := r.SnapshotFor(key)
	return defs
}

// SnapshotFor is Snapshot of the tools the key named key may call.
func (r *Registry) SnapshotFor(key string) (gen uint64, defs []Definition) {
	gen, all := r.Snapshot()
	if r.SeesAll(key) {
		return gen, all
	}
	defs = all[:0:0]
	for _, d := range all {
		if r.opts.Policy.Allows(key, d.Function.Name) {
			defs = append(defs, d)
		}
	}
	return gen, defs
}

// SeesAll reports whether the key named key may call every tool.
func (r *Registry) SeesAll(key string) bool {
	return r.opts.Policy == nil || r.opts.Policy.SeesAll(key)
}

// DefinitionsJSONFor is DefinitionsJSON of the tools the key named key may
// call: the same bytes on every call until the tools or the policy
// change. The caller must not modify them.
func (r *Registry) DefinitionsJSONFor(key string) []byte {
	if r.SeesAll(key) {
		return r.DefinitionsJSON()
	}
	r.mu.RLock()
	gen := r.genLocked()
	cached, ok := r.keyDefs[key]
	r.mu.RUnlock()
	if ok && cached.gen == gen {
		return cached.defs
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	gen = r.genLocked()
	var b bytes.Buffer
	b.WriteByte('[')
	n := 0
	for _, name := range r.namesLocked() {
		if !r.opts.Policy.Allows(key, name) {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.Write(r.tools[name].defJS)
		n++
	}
	b.WriteByte(']')
	if r.keyDefs == nil {
		r.keyDefs = map[string]keyDefs{}
	}
	r.keyDefs[key] = keyDefs{gen: gen, defs: b.Bytes()}
	return b.Bytes()
}

// DefinitionJSONFor is DefinitionJSON of a tool the key named key may
// call; a tool it may not is not found, nor a Fallback's, which has no
// definition.
func (r *Registry) DefinitionJSONFor(key, name string) ([]byte, bool) {
	t := r.FindFor(key, name)
	if t.e == nil || t.e.pending {
		return nil, false
	}
	return t.e.defJS, true
}

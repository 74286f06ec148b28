package http

import (
	"sync"
	"sync/atomic"

	"github.com/countbot/toolsvc/api"
	"github.com/countbot/toolsvc/internal/openapi"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolfmt"
)

// rendered is what is served from the tools' definitions of one registry
// generation: GET /tools?format= for every format but the default, and
// GET /openapi.json (whole, and its tools' operations only).
type rendered struct {
	gen          uint64
	formats      map[string][]byte
	strict       map[string][]byte // ?strict=true, by format
	formatErr    error
	openapi      []byte
	openapiTools []byte
	openapiErr   error
}

// renderings renders the definitions once per registry generation and
// per key that sees some tools only (TOOLSVC_POLICY_FILE): the bytes stay
// the same between calls (model prompt caches depend on it) until the
// tools or the policy change (a reload). Every key that sees every tool
// shares one rendering.
type renderings struct {
	reg     *registry.Registry
	version string
	mu      sync.Mutex // one rendering at a time
	cur     atomic.Pointer[rendered]
	// keys are the renderings of the keys that see some tools only.
	keys sync.Map // key name -> *rendered
}

func newRenderings(reg *registry.Registry, version string) *renderings {
	r := &renderings{reg: reg, version: version}
	r.get("") // rendered now: the first request does not wait
	return r
}

// get returns the renderings of the registry's current generation for the
// key named key.
func (r *renderings) get(key string) *rendered {
	if r.reg.SeesAll(key) {
		return r.load(&r.cur, "")
	}
	v, _ := r.keys.LoadOrStore(key, &atomic.Pointer[rendered]{})
	return r.load(v.(*atomic.Pointer[rendered]), key)
}

// load returns what cur holds, rendered again for key when the
// generation changed.
func (r *renderings) load(cur *atomic.Pointer[rendered], key string) *rendered {
	if c := cur.Load(); c != nil && c.gen == r.reg.Generation() {
		return c
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := cur.Load(); c != nil && c.gen == r.reg.Generation() {
		return c
	}
	gen, defs := r.reg.SnapshotFor(key)
	out := &rendered{gen: gen, formats: map[string][]byte{}, strict: map[string][]byte{}}
	for _, f := range toolfmt.Formats()[1:] {
		if out.formats[f], out.formatErr = toolfmt.Render(defs, f); out.formatErr != nil {
			break
		}
	}
	for _, f := range toolfmt.StrictFormats() {
		if out.formatErr == nil {
			out.strict[f], out.formatErr = toolfmt.RenderStrict(defs, f)
		}
	}
	out.openapi, out.openapiErr = openapi.Build(api.OpenAPI(), defs, r.version, false)
	if out.openapiErr == nil {
		out.openapiTools, out.openapiErr = openapi.Build(api.OpenAPI(), defs, r.version, true)
	}
	cur.Store(out)
	return out
}

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

	"github.com/countbot/toolsvc/internal/registry"
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
//   - door (middleware, on the routes that run calls): the metadata
//     headers (X-Session-ID, X-Source, X-Channel, X-Chat-ID, X-Reply-To), cleaned, and
//     the key's name are read once into the request's context;
//   - admit (in the door's handler, once the call is about to run): refused
//     while the service shuts down or when every slot is taken; otherwise
//     the call holds a slot, runs on a context the shutdown cancels, and
//     gets the Meta the door read.
type gate struct {
	keys     []keyEntry
	stopping context.Context
	sem      chan struct{}

	// running holds the calls let through and not done yet, which the
	// shutdown cancels (halt); halted is set once it has. One watch of
	// stopping for the gate costs less than one per call.
	mu      sync.Mutex
	running map[*pass]struct{}
	halted  bool
}

// keyEntry is a key as the gate keeps it: hashed, so that neither the
// comparison nor its length reveals anything.
type keyEntry struct {
	hash  [32]byte
	name  string
	admin bool
}

func newGate(keys []Key, stopping context.Context, maxConcurrent int) *gate {
	g := &gate{stopping: stopping, sem: make(chan struct{}, maxConcurrent), running: map[*pass]struct{}{}}
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

// door reads what a call carries besides its arguments into the request's
// context, once, for whichever door runs it: the metadata headers and the
// name of the caller's key.
func (g *gate) door(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := CallerFrom(r.Context())
		// Canonical spellings of the names: no conversion per lookup.
		m := registry.Meta{
			SessionID: headerValue(r, "X-Session-Id"),
			Source:    headerValue(r, "X-Source"),
			Channel:   headerValue(r, "X-Channel"),
			ChatID:    headerValue(r, "X-Chat-Id"),
			ReplyTo:   headerValue(r, "X-Reply-To"),
			Key:       c.Key,
		}
		r, st := withState(r)
		st.meta, st.hasMeta = m, true
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
	// meta is what the door read, for registry.Invoke; the door may add
	// Progress.
	meta registry.Meta
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
	if st == nil || !st.hasMeta {
		return nil, errNoDoor
	}
	meta := st.meta
	if g.stopped() {
		return nil, errStopping
	}
	select {
	case g.sem <- struct{}{}:
	default:
		return nil, errBusy
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	p := &pass{ctx: ctx, meta: meta, cancel: cancel, gate: g}
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

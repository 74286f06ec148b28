package http

import (
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strings"

	"github.com/countbot/toolsvc/internal/ready"
)

// readyz answers GET /readyz, which needs no key: load balancers and
// orchestrators probe it from the network (a kubelet from the node, over
// the pod's address), and they need only the status. What each check
// says besides "ok" can quote what is the operator's alone (an MCP
// server's stderr, URLs inside the network, the tools file's mistakes),
// so the reasons go only to a caller who may see them (mayReadReasons);
// anyone else gets each check as "ok" or "down". The status and the HTTP
// status (200 ready, 503 not ready) are the same for every caller.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	// The answer differs with the key presented and with the caller's
	// address: no cache may keep one for another caller.
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Add("Vary", "Authorization")
	if s.opts.Stopping.Err() != nil {
		writeError(w, kindShuttingDown, "the service is shutting down")
		return
	}
	local := fromThisMachine(r)
	inFlight := s.inFlight(local)
	if s.opts.Ready == nil {
		writeJSON(w, http.StatusOK, readyBody{Status: "ready", InFlight: inFlight})
		return
	}
	ok, checks := s.opts.Ready()
	shown := checks
	if !s.mayReadReasons(r, local) {
		shown = ready.Bare(checks)
	}
	if ok {
		writeJSON(w, http.StatusOK, readyBody{Status: "ready", Checks: shown, InFlight: inFlight})
		return
	}
	// The error envelope is kept beside the checks for clients that read
	// only error.code.
	b := readyBody{Status: "not_ready", Checks: shown, InFlight: inFlight,
		Error: &readyError{Code: kindNotReady, Message: "not ready: " + failedChecks(checks, shown)}}
	s.opts.Log.Warn().Interface("checks", checks).Msg("not ready")
	w.Header().Set("Retry-After", "1")
	writeJSON(w, statusOf[kindNotReady], b)
}

// mayReadReasons reports whether the caller of r may read why a check
// failed: a caller on the service's own machine (local, from
// fromThisMachine), or one that presents a valid API key. A service
// without keys gives the reasons to local callers only: it may be open on
// purpose, but it is reachable from wherever it listens, and no probe
// needs a reason.
func (s *server) mayReadReasons(r *http.Request, local bool) bool {
	return local || s.gate.keyed(r)
}

// inFlight is the number of tool calls running, for a caller on the
// service's own machine (the drain command a container's pre-stop hook
// runs), and nil for anyone else: how busy the service is is no business
// of the network's.
func (s *server) inFlight(local bool) *int {
	if !local {
		return nil
	}
	n := len(s.gate.sem)
	return &n
}

// fromThisMachine reports whether r comes from the service's own machine:
// its connection's peer (RemoteAddr, which net/http sets from the TCP
// connection; the service trusts no proxy and no header to name the
// client, so X-Forwarded-For makes nobody local) is a loopback address,
// and it carries none of the headers a reverse proxy adds. A proxy on the
// same machine connects from the loopback on behalf of anyone: what it
// forwards is taken as the network's. The headers can only take the
// reasons away, never give them, so a client gains nothing by sending
// them; a proxy that adds none of them makes its clients local, which
// the documentation of /readyz says.
func fromThisMachine(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.Unmap().IsLoopback() {
		return false
	}
	// Spelled as net/http stores the names; present at all, even empty.
	for _, name := range [...]string{"Forwarded", "X-Forwarded-For", "X-Real-Ip"} {
		if _, ok := r.Header[name]; ok {
			return false
		}
	}
	return true
}

// keyed reports whether r presents one of the service's API keys, read as
// authenticate reads it ("Authorization: Bearer <key>") and compared in
// constant time. False when the service has no keys. A missing or wrong
// key is no error here: the route needs none.
func (g *gate) keyed(r *http.Request) bool {
	if len(g.keys) == 0 {
		return false
	}
	scheme, key, found := strings.Cut(header(r.Header, "Authorization"), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	_, ok := g.lookup(strings.TrimSpace(key))
	return ok
}

// readyBody is the body of GET /readyz.
type readyBody struct {
	Status string `json:"status"`
	// Checks holds each check by name: "ok" or the reason, or, for a
	// caller who may not read the reasons, "ok" or "down".
	Checks map[string]string `json:"checks,omitempty"`
	// InFlight counts the tool calls running; given to loopback callers
	// only.
	InFlight *int        `json:"in_flight,omitempty"`
	Error    *readyError `json:"error,omitempty"`
}

type readyError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// failedChecks lists the checks that are not "ok", sorted, as "name: v"
// with v as shown to the caller (the reason, or "down"). Which checks
// failed is read from checks, the full outcome: a check this platform
// cannot make ("unavailable: ...") is not one of them, whatever shown
// calls it.
func failedChecks(checks, shown map[string]string) string {
	var out []string
	for name, v := range checks {
		if v != ready.OK && !strings.HasPrefix(v, "unavailable: ") {
			out = append(out, name+": "+shown[name])
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

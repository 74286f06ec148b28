package http

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/medialink"
	"github.com/countbot/toolsvc/internal/runes"
)

// guard keeps web pages the operator has not invited away from every route.
// A browser lets any page it shows send requests to any address, the
// loopback included: a "simple" request (a form POST, a text/plain fetch,
// sendBeacon, an <img>) needs no CORS preflight, so the page cannot read
// the answer but the request is served all the same, and a tool call runs.
// A page that renames the service's address (DNS rebinding: its own host
// name made to resolve to 127.0.0.1) even reads the answers, since to the
// browser it is then the page's own origin. The guard refuses, with a 403,
// before the keys are checked and before CORS answers:
//
//   - a request with an Origin header that TOOLSVC_CORS_ORIGINS does not
//     list ("*" lists every origin but "null", the opaque origin of
//     sandboxed frames and local files, which only an explicit "null"
//     admits), unless it is the service's own origin (see sameOrigin);
//   - a request a browser marks Sec-Fetch-Site: cross-site that carries no
//     Origin (navigations and <img> GETs from another site);
//   - a request whose Host names neither this machine's loopback (localhost,
//     a loopback address, the address the connection came in on) nor a host
//     of TOOLSVC_ALLOWED_HOSTS, when the connection came in on a loopback
//     address or when TOOLSVC_ALLOWED_HOSTS is set.
//
// Clients that are no browser (curl, Python, the MCP SDK) send no Origin
// and no Sec-Fetch-Site, and the Host of the URL they were given, so they
// pass as before.
type guard struct {
	anyOrigin bool
	origins   map[string]bool // lower case, without a trailing slash
	hosts     map[string]bool // lower case, without a trailing dot
	suffixes  []string        // ".example.com" for "*.example.com"
	log       zerolog.Logger
}

func newGuard(origins, hosts []string, log zerolog.Logger) *guard {
	g := &guard{origins: map[string]bool{}, hosts: map[string]bool{}, log: log}
	for _, o := range origins {
		if o == "*" {
			g.anyOrigin = true
			continue
		}
		g.origins[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
	}
	for _, h := range hosts {
		h = strings.ToLower(strings.TrimSuffix(strings.Trim(h, "[]"), "."))
		if rest, ok := strings.CutPrefix(h, "*."); ok {
			g.suffixes = append(g.suffixes, "."+rest)
			continue
		}
		g.hosts[h] = true
	}
	return g
}

func (g *guard) handle(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if kind, msg := g.check(r); kind != "" {
			g.log.Warn().Str("request_id", requestIDFrom(r.Context())).Str("code", kind).
				Str("origin", runes.Shorten(r.Header.Get("Origin"), 40)).Str("host", runes.Shorten(r.Host, 40)).
				Str("path", runes.Shorten(logPath(r.URL.Path), 40)).Msg("browser request refused")
			writeError(w, kind, msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// check returns the error kind and message of a request to refuse, or ""
// for one to serve.
func (g *guard) check(r *http.Request) (kind, message string) {
	origins := r.Header["Origin"] // the name as net/http spells it: see header
	origin := ""
	switch {
	case len(origins) > 1:
		return kindOriginNotAllowed, "a request may carry one Origin header, not several"
	case len(origins) == 1:
		origin = origins[0]
	}
	if origin != "" && !g.originAllowed(origin) && !g.sameOrigin(origin, r) {
		return kindOriginNotAllowed, fmt.Sprintf("requests from web pages of origin %q are refused: the service runs tools, and only the origins in TOOLSVC_CORS_ORIGINS may call it from a browser. Clients that are no browser send no Origin header", runes.Shorten(origin, 40))
	}
	// A browser sends Origin with every request but GET and HEAD; a GET it
	// sends for another site's page (a link, an <img>) says so here.
	if origin == "" && strings.EqualFold(header(r.Header, "Sec-Fetch-Site"), "cross-site") {
		return kindOriginNotAllowed, "requests a browser sends on behalf of another site's page are refused; list the page's origin in TOOLSVC_CORS_ORIGINS to allow them"
	}
	// The probes are exempt from the Host check, not from the Origin check:
	// Kubernetes and other orchestrators probe with the pod's address or
	// name as Host, which no one lists, and what a page could read there by
	// rebinding (alive, ready, the version) helps it to nothing it could not
	// try anyway. A browser's request from another origin is still refused.
	if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
		return "", ""
	}
	// So are the signed media links: a chat platform fetches them through
	// TOOLSVC_PUBLIC_URL, with its public name as Host, which need not be
	// listed. A page that renamed itself to this address gains nothing
	// there: without a valid token, which only the platform is given and
	// no one can make, every path under it is a 404.
	if strings.HasPrefix(r.URL.Path, medialink.Route) {
		return "", ""
	}
	local := localAddr(r)
	if len(g.hosts) == 0 && len(g.suffixes) == 0 && !local.IsLoopback() {
		return "", ""
	}
	if !g.hostAllowed(r.Host, local) {
		return kindHostNotAllowed, fmt.Sprintf("host %q is not a name of this service: a web page that made its own name point at this address (DNS rebinding) is refused. Use localhost or 127.0.0.1, or add the name to TOOLSVC_ALLOWED_HOSTS", runes.Shorten(r.Host, 40))
	}
	return "", ""
}

func (g *guard) originAllowed(origin string) bool {
	o := strings.ToLower(strings.TrimSuffix(origin, "/"))
	if o == "null" {
		return g.origins[o]
	}
	return g.anyOrigin || g.origins[o]
}

// sameOrigin reports whether origin is the service's own, the origin of a
// page it served (the /docs page): the origin names the very host and
// port the request was sent to, and that host is checked to be this
// service's (the loopback, or TOOLSVC_ALLOWED_HOSTS), so that a page that
// renamed the service's address (DNS rebinding) is not taken for it. On a
// connection from outside the loopback with no allowed hosts set, the Host
// proves nothing, and only TOOLSVC_CORS_ORIGINS admits an origin.
func (g *guard) sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !strings.EqualFold(u.Host, r.Host) {
		return false
	}
	local := localAddr(r)
	if len(g.hosts) == 0 && len(g.suffixes) == 0 && !local.IsLoopback() {
		return false
	}
	return g.hostAllowed(r.Host, local)
}

// hostAllowed reports whether the Host header names localhost, a loopback
// address, the address the connection came in on, or an allowed host, with
// any port. The port is not compared: a page that rebinds a name chooses
// the name, never the port, and a proxy or port forward may publish the
// service on a port of its own. A request without Host (HTTP/1.0) passes:
// browsers always send one.
func (g *guard) hostAllowed(hostHeader string, local netip.Addr) bool {
	if hostHeader == "" {
		return true
	}
	name, ok := hostName(hostHeader)
	if !ok {
		return false
	}
	if name == "localhost" || g.hosts[name] {
		return true
	}
	if ip, err := netip.ParseAddr(name); err == nil {
		ip = ip.Unmap().WithZone("")
		return ip.IsLoopback() || (local.IsValid() && ip == local)
	}
	for _, s := range g.suffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// hostName returns the host of a Host header without its port, its IPv6
// brackets and a trailing dot, in lower case; ok is false when the header
// is no host[:port].
func hostName(h string) (name string, ok bool) {
	host, port := h, ""
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return "", false
		}
		host, port = h[1:end], h[end+1:]
		if port != "" && !strings.HasPrefix(port, ":") {
			return "", false
		}
	} else if i := strings.LastIndexByte(h, ':'); i >= 0 {
		if strings.IndexByte(h, ':') != i {
			return "", false // an IPv6 address without brackets
		}
		host, port = h[:i], h[i:]
	}
	if port != "" && strings.Trim(port[1:], "0123456789") != "" {
		return "", false
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host, host != ""
}

// localAddr is the address the request's connection came in on, without
// a zone; invalid when unknown (a handler called without a server).
func localAddr(r *http.Request) netip.Addr {
	a, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if a == nil {
		return netip.Addr{}
	}
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort().Addr().Unmap().WithZone("")
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap().WithZone("")
}

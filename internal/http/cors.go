package http

import (
	"net/http"
	"strings"
)

// cors answers browsers for the origins the operator allows: the
// Access-Control-* headers on every answer, and preflight requests
// (OPTIONS with Access-Control-Request-Method) with 204 before the keys
// are checked, since a browser sends no key with them. Without configured
// origins it does nothing, and browsers keep other origins' pages from
// reading the answers.
type cors struct {
	any     bool
	origins map[string]bool
	// allowHeaders is the preflight's Access-Control-Allow-Headers.
	allowHeaders string
}

// Headers a browser may read, and methods it may use.
const (
	corsExposeHeaders = "X-Request-ID, Retry-After, WWW-Authenticate, Allow, Mcp-Session-Id"
	corsAllowMethods  = "GET, HEAD, POST, DELETE, OPTIONS"
)

// corsAllowHeaders lists the headers a browser may send: the key, the
// body's type and what it accepts, every header the gate reads into a
// call's facts (taken from its own list, so that a header the gate reads
// is one a page may send), and MCP's own.
func corsAllowHeaders(calls []callHeader) string {
	names := []string{"Authorization", "Content-Type", "Accept"}
	for _, h := range calls {
		names = append(names, h.name)
	}
	names = append(names, "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-ID")
	return strings.Join(names, ", ")
}

func newCORS(origins []string, allowHeaders string) *cors {
	c := &cors{origins: map[string]bool{}, allowHeaders: allowHeaders}
	for _, o := range origins {
		if o == "*" {
			c.any = true
		}
		c.origins[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
	}
	return c
}

func (c *cors) allowed(origin string) bool {
	o := strings.ToLower(origin)
	return origin != "" && (c.origins[o] || c.any && o != "null")
}

func (c *cors) handle(next http.Handler) http.Handler {
	if len(c.origins) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Add("Vary", "Origin")
		origin := r.Header.Get("Origin")
		if !c.allowed(origin) {
			next.ServeHTTP(w, r)
			return
		}
		// The origin is echoed even when any is allowed, the same way for
		// every answer; Vary: Origin keeps caches from mixing them up.
		h.Set("Access-Control-Allow-Origin", origin)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
			h.Set("Access-Control-Allow-Methods", corsAllowMethods)
			h.Set("Access-Control-Allow-Headers", c.allowHeaders)
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		next.ServeHTTP(w, r)
	})
}

package http

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/registry"
)

// TestGuardCheck: which requests the guard refuses, by Origin,
// Sec-Fetch-Site, Host and the address the connection came in on.
func TestGuardCheck(t *testing.T) {
	const (
		loop4 = "127.0.0.1:8080"
		loop6 = "[::1]:8080"
		lan   = "192.168.1.5:8080"
	)
	allowed := []string{"https://chat.example.com", "http://localhost:3000/"}
	for _, tc := range []struct {
		name    string
		origins []string // TOOLSVC_CORS_ORIGINS; nil: allowed
		hosts   []string // TOOLSVC_ALLOWED_HOSTS
		local   string   // the connection's local address; "": unknown
		path    string   // "/tools" unless set
		origin  []string // Origin headers
		site    string   // Sec-Fetch-Site
		host    string
		want    string // the error kind, "" to serve
	}{
		// Clients that are no browser.
		{name: "curl on loopback", local: loop4, host: "127.0.0.1:8080"},
		{name: "localhost", local: loop4, host: "localhost:8080"},
		{name: "localhost without port", local: loop4, host: "localhost"},
		{name: "localhost other port (a proxy)", local: loop4, host: "localhost:9999"},
		{name: "localhost upper case", local: loop4, host: "LocalHost:8080"},
		{name: "localhost trailing dot", local: loop4, host: "localhost.:8080"},
		{name: "127.0.0.1 without port", local: loop4, host: "127.0.0.1"},
		{name: "another loopback address", local: loop4, host: "127.0.0.2:8080"},
		{name: "IPv6 loopback", local: loop6, host: "[::1]:8080"},
		{name: "IPv6 loopback without port", local: loop6, host: "[::1]"},
		{name: "IPv4-mapped loopback", local: loop6, host: "[::ffff:127.0.0.1]:8080"},
		{name: "no Host (HTTP/1.0)", local: loop4, host: ""},
		{name: "Origin empty", local: loop4, host: "localhost", origin: []string{""}},
		{name: "Sec-Fetch-Site none (typed in the address bar)", local: loop4, host: "localhost:8080", site: "none"},
		{name: "Sec-Fetch-Site same-origin", local: loop4, host: "localhost:8080", site: "same-origin"},

		// DNS rebinding: another name on a loopback connection.
		{name: "rebinding name", local: loop4, host: "rebind.evil.example:8080", want: kindHostNotAllowed},
		{name: "rebinding name without port", local: loop4, host: "attacker.example", want: kindHostNotAllowed},
		{name: "rebinding on IPv6", local: loop6, host: "attacker.example:8080", want: kindHostNotAllowed},
		{name: "localhost as a subdomain", local: loop4, host: "localhost.attacker.example", want: kindHostNotAllowed},
		{name: "a name under localhost", local: loop4, host: "evil.localhost:8080", want: kindHostNotAllowed},
		{name: "another address", local: loop4, host: "10.0.0.1:8080", want: kindHostNotAllowed},
		{name: "IPv6 without brackets", local: loop6, host: "::1", want: kindHostNotAllowed},
		{name: "bad port", local: loop4, host: "localhost:80x", want: kindHostNotAllowed},
		{name: "unclosed bracket", local: loop6, host: "[::1:8080", want: kindHostNotAllowed},
		{name: "junk after bracket", local: loop6, host: "[::1]x", want: kindHostNotAllowed},
		{name: "rebinding to /readyz is not refused (probes)", local: loop4, path: "/readyz", host: "attacker.example"},
		{name: "rebinding to /healthz is not refused (probes)", local: loop4, path: "/healthz", host: "10.1.2.3:8080"},
		{name: "rebinding to an unknown route", local: loop4, path: "/", host: "attacker.example", want: kindHostNotAllowed},

		// Allowed hosts.
		{name: "allowed host", hosts: []string{"toolsvc.example.com"}, local: loop4, host: "toolsvc.example.com:443"},
		{name: "allowed host, case and dot", hosts: []string{"Toolsvc.Example.com."}, local: loop4, host: "TOOLSVC.example.com.:443"},
		{name: "allowed wildcard", hosts: []string{"*.corp.example"}, local: loop4, host: "a.b.corp.example"},
		{name: "wildcard is not the apex", hosts: []string{"*.corp.example"}, local: loop4, host: "corp.example", want: kindHostNotAllowed},
		{name: "wildcard is a label boundary", hosts: []string{"*.corp.example"}, local: loop4, host: "evilcorp.example", want: kindHostNotAllowed},
		{name: "allowed IPv6 host", hosts: []string{"[fd00::1]"}, local: lan, host: "[fd00::1]:8080"},
		{name: "allowed hosts do not drop localhost", hosts: []string{"toolsvc.example.com"}, local: loop4, host: "localhost:8080"},

		// Not on loopback: the Host is checked only with allowed hosts.
		{name: "LAN without allowed hosts", local: lan, host: "anything.example:8080"},
		{name: "LAN with allowed hosts", hosts: []string{"toolsvc.example.com"}, local: lan, host: "anything.example:8080", want: kindHostNotAllowed},
		{name: "LAN, allowed host", hosts: []string{"toolsvc.example.com"}, local: lan, host: "toolsvc.example.com"},
		{name: "LAN, its own address", hosts: []string{"toolsvc.example.com"}, local: lan, host: "192.168.1.5:8080"},
		{name: "LAN, probe with the pod's address", hosts: []string{"toolsvc.example.com"}, local: lan, path: "/readyz", host: "10.244.0.7:8080"},
		{name: "no server (a handler test)", host: "example.com"},

		// Origins.
		{name: "foreign origin", local: loop4, host: "localhost:8080", origin: []string{"http://evil.example"}, want: kindOriginNotAllowed},
		{name: "foreign origin, LAN", local: lan, host: "toolsvc:8080", origin: []string{"http://evil.example"}, want: kindOriginNotAllowed},
		{name: "foreign origin to /healthz", local: loop4, path: "/healthz", host: "localhost:8080", origin: []string{"http://evil.example"}, want: kindOriginNotAllowed},
		{name: "loopback origin of another port", local: loop4, host: "localhost:8080", origin: []string{"http://127.0.0.2:4000"}, want: kindOriginNotAllowed},
		// The service's own origin: a page it served (/docs) calling it.
		{name: "the service's own origin", local: loop4, host: "localhost:8080", origin: []string{"http://localhost:8080"}},
		{name: "own origin, another port", local: loop4, host: "localhost:8080", origin: []string{"http://localhost:8081"}, want: kindOriginNotAllowed},
		{name: "own origin, rebinding name", local: loop4, host: "attacker.example:8080", origin: []string{"http://attacker.example:8080"}, want: kindOriginNotAllowed},
		{name: "own origin, LAN without allowed hosts", local: lan, host: "anything.example:8080", origin: []string{"http://anything.example:8080"}, want: kindOriginNotAllowed},
		{name: "own origin, allowed host", hosts: []string{"toolsvc.example.com"}, local: lan, host: "toolsvc.example.com", origin: []string{"https://toolsvc.example.com"}},
		{name: "own origin, other scheme", local: loop4, host: "localhost:8080", origin: []string{"file://localhost:8080"}, want: kindOriginNotAllowed},
		{name: "allowed origin", local: loop4, host: "localhost:8080", origin: []string{"https://chat.example.com"}},
		{name: "allowed origin, trailing slash in the list", local: loop4, host: "localhost:8080", origin: []string{"http://localhost:3000"}},
		{name: "allowed origin, upper case", local: loop4, host: "localhost:8080", origin: []string{"https://CHAT.example.com"}},
		{name: "allowed origin, other scheme", local: loop4, host: "localhost:8080", origin: []string{"http://chat.example.com"}, want: kindOriginNotAllowed},
		{name: "allowed origin, other port", local: loop4, host: "localhost:8080", origin: []string{"https://chat.example.com:8443"}, want: kindOriginNotAllowed},
		{name: "allowed origin, cross-site", local: loop4, host: "localhost:8080", origin: []string{"https://chat.example.com"}, site: "cross-site"},
		{name: "two Origin headers", local: loop4, host: "localhost:8080", origin: []string{"https://chat.example.com", "http://evil.example"}, want: kindOriginNotAllowed},
		{name: "null origin", local: loop4, host: "localhost:8080", origin: []string{"null"}, want: kindOriginNotAllowed},
		{name: "null origin with *", origins: []string{"*"}, local: loop4, host: "localhost:8080", origin: []string{"null"}, want: kindOriginNotAllowed},
		{name: "null origin listed", origins: []string{"null"}, local: loop4, host: "localhost:8080", origin: []string{"null"}},
		{name: "any origin with *", origins: []string{"*"}, local: loop4, host: "localhost:8080", origin: []string{"http://evil.example"}},
		{name: "no origins configured", origins: []string{}, local: loop4, host: "localhost:8080", origin: []string{"https://chat.example.com"}, want: kindOriginNotAllowed},
		{name: "allowed origin, rebinding host", local: loop4, host: "attacker.example:8080", origin: []string{"https://chat.example.com"}, want: kindHostNotAllowed},

		// Sec-Fetch-Site without Origin (GET navigations, <img>).
		{name: "cross-site GET", local: loop4, host: "localhost:8080", site: "cross-site", want: kindOriginNotAllowed},
		{name: "cross-site GET, case", local: loop4, host: "localhost:8080", site: "Cross-Site", want: kindOriginNotAllowed},
		{name: "cross-site GET to /healthz", local: loop4, path: "/healthz", host: "localhost:8080", site: "cross-site", want: kindOriginNotAllowed},
		{name: "cross-site GET with *", origins: []string{"*"}, local: loop4, host: "localhost:8080", site: "cross-site", want: kindOriginNotAllowed},
		{name: "same-site GET", local: loop4, host: "localhost:8080", site: "same-site"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			origins := tc.origins
			if origins == nil {
				origins = allowed
			}
			g := newGuard(origins, tc.hosts, zerolog.Nop())
			path := tc.path
			if path == "" {
				path = "/tools"
			}
			r := httptest.NewRequest(http.MethodGet, path, nil)
			r.Host = tc.host
			for _, o := range tc.origin {
				r.Header.Add("Origin", o)
			}
			if tc.site != "" {
				r.Header.Set("Sec-Fetch-Site", tc.site)
			}
			if tc.local != "" {
				addr, err := net.ResolveTCPAddr("tcp", tc.local)
				if err != nil {
					t.Fatal(err)
				}
				r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
			}
			if kind, msg := g.check(r); kind != tc.want {
				t.Errorf("got %q (%s), want %q", kind, msg, tc.want)
			}
		})
	}
}

// TestGuardEveryDoor: through the real handler on a loopback server, a
// foreign Origin, a cross-site GET and a rebinding Host get the 403 error
// body on every route, before the keys; no tool runs. Requests without
// Origin, and preflights of an allowed origin, are served as before.
func TestGuardEveryDoor(t *testing.T) {
	const key = "guard-test-key-0123456789"
	for _, keys := range [][]Key{nil, {{Name: "test", Secret: key}}} {
		ran := &countTool{}
		reg := registry.New(registry.Options{})
		if err := reg.Register(ran); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(NewHandler(Options{
			Registry:    reg,
			Log:         zerolog.Nop(),
			Keys:        keys,
			CORSOrigins: []string{"https://chat.example.com"},
			Metrics:     http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "m 1\n") }),
			Routes: func(r chi.Router) {
				r.Get("/agents", func(w http.ResponseWriter, r *http.Request) { writeRaw(w, 200, []byte(`{"agents":[]}`)) })
				r.Get("/skills", func(w http.ResponseWriter, r *http.Request) { writeRaw(w, 200, []byte(`{"skills":[]}`)) })
			},
		}))
		t.Cleanup(srv.Close)
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
		doors := []struct{ method, path, body string }{
			{"POST", "/tools/count/invoke", `{}`},
			{"GET", "/tools", ""},
			{"GET", "/tools/count", ""},
			{"GET", "/agents", ""},
			{"GET", "/skills", ""},
			{"GET", "/openapi.json", ""},
			{"GET", "/metrics", ""},
			{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count","arguments":{}}}`},
			{"GET", "/", ""},
			{"DELETE", "/tools", ""},
		}
		send := func(method, path, body string, h http.Header, host string) (int, http.Header, []byte) {
			t.Helper()
			req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header = h.Clone()
			if req.Header == nil {
				req.Header = http.Header{}
			}
			if keys != nil {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			if host != "" {
				req.Host = host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, resp.Header, data
		}
		refused := func(name string, code int, h http.Header, body []byte, kind string) {
			t.Helper()
			var e errorBody
			if code != http.StatusForbidden || json.Unmarshal(body, &e) != nil || e.Error.Code != kind || e.Error.Message == "" {
				t.Errorf("keys=%d %s: %d %s, want 403 %s", len(keys), name, code, body, kind)
			}
			if h.Get("Access-Control-Allow-Origin") != "" || h.Get("X-Request-ID") == "" || h.Get("Content-Type") != "application/json" {
				t.Errorf("keys=%d %s: headers %v", len(keys), name, h)
			}
		}
		for _, d := range doors {
			name := d.method + " " + d.path
			for _, o := range []string{"http://evil.example", "null", "http://localhost:" + port} {
				code, h, body := send(d.method, d.path, d.body, http.Header{"Origin": {o}, "Content-Type": {"text/plain"}}, "")
				refused(name+" Origin "+o, code, h, body, kindOriginNotAllowed)
			}
			code, h, body := send(d.method, d.path, d.body, http.Header{"Sec-Fetch-Site": {"cross-site"}}, "")
			refused(name+" cross-site", code, h, body, kindOriginNotAllowed)
			code, h, body = send(d.method, d.path, d.body, nil, "attacker.example:"+port)
			refused(name+" rebinding Host", code, h, body, kindHostNotAllowed)
			// The same without the keys: the guard answers first.
			if keys != nil {
				req, _ := http.NewRequest(d.method, srv.URL+d.path, strings.NewReader(d.body))
				req.Header.Set("Origin", "http://evil.example")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden {
					t.Errorf("%s without key, foreign Origin: %d, want 403", name, resp.StatusCode)
				}
			}
		}
		if n := ran.calls.Load(); n != 0 {
			t.Fatalf("keys=%d: refused requests ran the tool %d times", len(keys), n)
		}
		// The control: the same call without Origin runs it.
		if code, _, body := send("POST", "/tools/count/invoke", `{}`, nil, ""); code != 200 || ran.calls.Load() != 1 {
			t.Errorf("keys=%d a call without Origin: %d %s, %d runs", len(keys), code, body, ran.calls.Load())
		}

		// Served: no Origin, the loopback names, an allowed origin.
		for _, host := range []string{"", "localhost:" + port, "127.0.0.1:" + port, "localhost", "LOCALHOST.:" + port} {
			if code, _, body := send("GET", "/tools", "", nil, host); code != 200 {
				t.Errorf("keys=%d GET /tools Host %q: %d %s", len(keys), host, code, body)
			}
		}
		if code, h, body := send("GET", "/tools", "", http.Header{"Origin": {"https://chat.example.com"}, "Sec-Fetch-Site": {"cross-site"}}, ""); code != 200 || h.Get("Access-Control-Allow-Origin") != "https://chat.example.com" {
			t.Errorf("keys=%d allowed origin: %d %v %s", len(keys), code, h, body)
		}
		// Probes: no Host check, the Origin check still.
		for _, p := range []string{"/healthz", "/readyz"} {
			if code, _, body := send("GET", p, "", nil, "10.244.0.7:8080"); code != 200 {
				t.Errorf("keys=%d %s with the pod's address: %d %s", len(keys), p, code, body)
			}
			code, h, body := send("GET", p, "", http.Header{"Origin": {"http://evil.example"}}, "")
			refused(p+" foreign Origin", code, h, body, kindOriginNotAllowed)
		}

		// Preflight: an allowed origin is answered without a key, another
		// is refused.
		pre := http.Header{"Origin": {"https://chat.example.com"}, "Access-Control-Request-Method": {"POST"}}
		req, _ := http.NewRequest(http.MethodOptions, srv.URL+"/tools/count/invoke", nil)
		req.Header = pre
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "https://chat.example.com" {
			t.Errorf("keys=%d preflight of an allowed origin: %d %v", len(keys), resp.StatusCode, resp.Header)
		}
		pre.Set("Origin", "http://evil.example")
		code, h, body := send(http.MethodOptions, "/tools/count/invoke", "", pre, "")
		refused("preflight of another origin", code, h, body, kindOriginNotAllowed)
	}
}

// TestGuardIPv6Loopback: on [::1] the IPv6 names pass and others do not.
func TestGuardIPv6Loopback(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	srv := httptest.NewUnstartedServer(NewHandler(Options{Registry: registry.New(registry.Options{}), Log: zerolog.Nop()}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for host, want := range map[string]int{
		"[::1]:" + port:     200,
		"[::1]":             200,
		"localhost:" + port: 200,
		"[0:0:0:0:0:0:0:1]": 200,
		"attacker.example":  403,
		"[fd00::1]:" + port: 403,
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/tools", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %q: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// countTool counts its calls.
type countTool struct{ calls atomic.Int32 }

func (c *countTool) Name() string                { return "count" }
func (c *countTool) Description() string         { return "counts its calls" }
func (c *countTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (c *countTool) Execute(context.Context, json.RawMessage) (string, error) {
	c.calls.Add(1)
	return "counted", nil
}

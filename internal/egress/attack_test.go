package egress

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/netguard"
)

// The attacks a command may try through its proxy. A command that
// ignores the proxy (curl --noproxy '*', a raw socket to an address) is
// out of scope here: its network namespace has no way out but the proxy,
// which the sandbox's own tests check.

// TestConnectRefusals: CONNECTs the rules refuse are answered 403 with
// the destination and the rule, reported to OnRefusal, and never dialled:
// the destination (a counting server every test name is sent to) sees no
// connection at all.
func TestConnectRefusals(t *testing.T) {
	target := newCountingServer(t)
	r := newRig(t, rigConfig{
		allow: []string{"listed.test", "*.mirror.test", "echo.test:8443", "10.9.0.0/16:*"},
		deny:  []string{"bad.mirror.test"},
		guard: netguard.Options{AllowHosts: []string{"*.test"}, AllowCIDRs: []string{"127.0.0.0/8"}},
	})
	for _, name := range []string{"evil.test", "listed.test", "mirror.test", "bad.mirror.test", "echo.test", "127.0.0.1"} {
		for _, port := range []int{443, 80, 8443, 22} {
			r.redirect(name, port, target.addr())
		}
	}
	cases := []struct {
		authority, status, text, rule string
	}{
		{"evil.test:443", "403", "refused: evil.test:443 (no allow rule matches)", "no allow rule matches"},
		{"listed.test:8443", "403", "refused: listed.test:8443 (no allow rule matches port 8443: allow \"listed.test\" covers ports 80 and 443 only", `no allow rule matches port 8443`},
		{"listed.test:22", "403", "listed.test:22 (no allow rule matches port 22", "no allow rule matches port 22"},
		{"echo.test:443", "403", `allow "echo.test:8443" covers port 8443 only`, `no allow rule matches port 443`},
		{"mirror.test:443", "403", `refused: mirror.test:443 (no allow rule matches: allow "*.mirror.test" covers the names below mirror.test, not mirror.test itself)`, "no allow rule matches"},
		{"bad.mirror.test:443", "403", `refused: bad.mirror.test:443 (deny "bad.mirror.test")`, `deny "bad.mirror.test"`},
		{"EVIL.test.:443", "403", "refused: evil.test:443 (no allow rule matches)", "no allow rule matches"},
		{"127.0.0.1:443", "403", "refused: 127.0.0.1:443 (no allow rule matches; an IP address is allowed only by a CIDR rule", "CIDR"},
		{"[::1]:443", "403", "refused: [::1]:443 (no allow rule matches; an IP address is allowed only by a CIDR rule", "CIDR"},
		{"[2001:db8::1]:443", "403", "refused: [2001:db8::1]:443 (no allow rule matches; an IP address", "CIDR"},
		{"0x7f.1:443", "403", "refused: 0x7f.1:443 (not a valid host name)", ""},
		{"2130706433:443", "403", "(not a valid host name)", ""},
		{"listed.test:0", "403", "(not a valid port)", ""},
		{"listed.test:99999", "403", "(not a valid port)", ""},
		{"listed.test", "400", "CONNECT needs a destination as host:port", ""},
	}
	for _, c := range cases {
		t.Run(c.authority, func(t *testing.T) {
			resp, _, _ := r.raw(t, "CONNECT "+c.authority+" HTTP/1.1\r\nHost: "+c.authority+"\r\n\r\n")
			status, _ := strconv.Atoi(c.status)
			wantRefused(t, resp, status, c.text)
			if ref := r.lastRefusal(t); ref.Method != http.MethodConnect || !strings.Contains(ref.Rule, c.rule) || ref.Status != status {
				t.Errorf("OnRefusal got %+v", ref)
			}
		})
	}
	time.Sleep(50 * time.Millisecond) // a stray connection would be counted by now
	if n, d := target.conns.Load(), r.dials.Load(); n != 0 || d != 0 {
		t.Errorf("refused destinations were dialled %d times, and reached %d times", d, n)
	}
}

// TestGuardRefusals: a listed name that resolves to loopback, or to a
// cloud metadata endpoint, is refused by the netguard Guard when the
// proxy dials, with the guard's reason; the metadata endpoint even when
// the operator opened the name itself (only a CIDR opens it).
func TestGuardRefusals(t *testing.T) {
	target := newCountingServer(t)
	cases := []struct {
		name   string
		guard  netguard.Options
		host   string
		reason string
	}{
		{"loopback, guard closed", netguard.Options{}, "loopback.test", "loopback.test resolves to a non-public address (loopback)"},
		{"metadata, guard closed", netguard.Options{}, "meta.test", "meta.test resolves to a non-public address (cloud metadata endpoint)"},
		{"metadata, name opened", netguard.Options{AllowHosts: []string{"meta.test"}}, "meta.test", "meta.test resolves to a non-public address (cloud metadata endpoint)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, rigConfig{allow: []string{c.host + ":*", "169.254.169.254/32:*"}, guard: c.guard})
			port := strings.Split(target.addr(), ":")[1]
			resp, _, _ := r.raw(t, "CONNECT "+c.host+":"+port+" HTTP/1.1\r\n\r\n")
			wantRefused(t, resp, http.StatusForbidden, "refused: "+c.host+":"+port+" (allow \""+c.host+":*\" matches, but the network guard refused it: "+c.reason)
			ref := r.lastRefusal(t)
			if ref.Rule != `allow "`+c.host+`:*"` || !strings.Contains(ref.Reason, c.reason) {
				t.Errorf("OnRefusal got %+v", ref)
			}
			// The same through a plain HTTP request.
			resp, _, _ = r.raw(t, "GET http://"+c.host+":"+port+"/ HTTP/1.1\r\nHost: "+c.host+":"+port+"\r\n\r\n")
			wantRefused(t, resp, http.StatusForbidden, c.reason)
			// And the address written out: allowed by a CIDR rule, refused by the guard.
			resp, _, _ = r.raw(t, "CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n")
			wantRefused(t, resp, http.StatusForbidden, "169.254.169.254 is not a public address (cloud metadata endpoint)")
		})
	}
	if n := target.conns.Load(); n != 0 {
		t.Errorf("the target was reached %d times", n)
	}
}

// TestSNICheck: a tunnel to port 443 must start with a ClientHello that
// names the CONNECT's host. Fronting (SNI of another host), no SNI, or
// anything but TLS closes the tunnel (with a TLS access_denied alert)
// before one byte reaches the destination, which is dialled but gets
// nothing; the host the SNI named is never dialled.
func TestSNICheck(t *testing.T) {
	listed := newCountingServer(t)
	evil := newCountingServer(t)
	r := newRig(t, rigConfig{
		allow: []string{"listed.test", "127.0.0.1/32"},
		guard: netguard.Options{AllowHosts: []string{"listed.test", "evil.test"}, AllowCIDRs: []string{"127.0.0.1/32"}},
	})
	r.redirect("listed.test", 443, listed.addr())
	r.redirect("127.0.0.1", 443, listed.addr())
	r.redirect("evil.test", 443, evil.addr())
	cases := []struct {
		name, authority, sni string
		raw                  string // sent instead of a ClientHello
		reason               string
	}{
		{"fronting", "listed.test:443", "evil.test", "", "the TLS ClientHello names evil.test (SNI), not listed.test, the host the CONNECT named"},
		{"fronting, case", "listed.test:443", "EVIL.test", "", "names evil.test (SNI)"},
		{"no SNI", "listed.test:443", "", "", "the TLS ClientHello names no server (no SNI); a tunnel to listed.test must name listed.test"},
		{"not TLS", "listed.test:443", "", "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n", "a tunnel to port 443 must carry TLS"},
		{"IP target, SNI not allowed", "127.0.0.1:443", "evil.test", "", "names evil.test (SNI), which the rules do not allow (no allow rule matches)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn, br := r.connect(t, c.authority)
			var err error
			if c.raw != "" {
				io.WriteString(conn, c.raw)
				_, err = io.ReadAll(br)
			} else {
				tc := tls.Client(bufConn{conn, br}, &tls.Config{ServerName: c.sni, InsecureSkipVerify: c.sni == ""})
				err = tc.Handshake()
			}
			if c.raw == "" && (err == nil || !strings.Contains(err.Error(), "access denied")) {
				t.Errorf("handshake: %v, want the proxy's access denied alert", err)
			}
			ref := r.lastRefusal(t)
			if ref.Status != 0 || ref.Reason != c.reason && !strings.Contains(ref.Reason, c.reason) {
				t.Errorf("OnRefusal got %+v, want reason %q", ref, c.reason)
			}
		})
	}
	waitFor(t, "the destination's connections to end", func() bool { return listed.conns.Load() == int32(len(cases)) })
	time.Sleep(50 * time.Millisecond)
	if b, n := listed.bytes.Load(), evil.conns.Load(); b != 0 || n != 0 {
		t.Errorf("%d bytes reached the listed host and %d connections the SNI's host", b, n)
	}
}

// TestSNIAllowed: a ClientHello that names the CONNECT's host in another
// case passes, as does one without SNI, or with an allowed name, to an
// address allowed by a CIDR rule.
func TestSNIAllowed(t *testing.T) {
	cert := newTestCert(t)
	srv := newTLSServer(t, cert, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	r := newRig(t, rigConfig{
		allow: []string{"mirror.test", "127.0.0.1/32"},
		guard: netguard.Options{AllowHosts: []string{"mirror.test"}, AllowCIDRs: []string{"127.0.0.1/32"}},
	})
	r.redirect("mirror.test", 443, srv.Listener.Addr().String())
	r.redirect("127.0.0.1", 443, srv.Listener.Addr().String())
	for _, c := range []struct{ authority, sni string }{
		{"mirror.test:443", "MIRROR.Test"}, {"127.0.0.1:443", ""}, {"127.0.0.1:443", "mirror.test"},
	} {
		conn, br := r.connect(t, c.authority)
		tc := tls.Client(bufConn{conn, br}, &tls.Config{ServerName: c.sni, RootCAs: cert.pool, InsecureSkipVerify: c.sni == ""})
		if err := tc.Handshake(); err != nil {
			t.Errorf("CONNECT %s with SNI %q: %v", c.authority, c.sni, err)
		}
		tc.Close()
	}
	if n := r.refusalCount(); n != 0 {
		t.Errorf("%d refusals: %+v", n, r.refusals)
	}
}

// TestPlainHTTPRefusals: plain requests refused before anything is sent
// on: a Host header naming another host (or port, or twice), a request
// that is not for a proxy, https:// in absolute form, an unlisted host.
func TestPlainHTTPRefusals(t *testing.T) {
	target := newCountingServer(t)
	r := newRig(t, rigConfig{allow: []string{"mirror.test"}, guard: openGuard()})
	r.redirect("mirror.test", 80, target.addr())
	r.redirect("evil.test", 80, target.addr())
	cases := []struct {
		name, request, text string
	}{
		{"Host mismatch", "GET http://mirror.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n",
			"refused: mirror.test:80 (the Host header names evil.test, not mirror.test:80, the host and port of the request's URL)"},
		{"Host port mismatch", "GET http://mirror.test/ HTTP/1.1\r\nHost: mirror.test:8080\r\n\r\n", "the Host header names mirror.test:8080"},
		{"not a proxy request", "GET /secret HTTP/1.1\r\nHost: mirror.test\r\n\r\n",
			"refused: mirror.test:80 (not a proxy request: send CONNECT host:port, or a request for an absolute http:// URL"},
		{"https in absolute form", "GET https://mirror.test/ HTTP/1.1\r\nHost: mirror.test\r\n\r\n", "only http:// URLs are forwarded; for https:// send CONNECT"},
		{"unlisted", "POST http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\nContent-Length: 3\r\n\r\nabc", "refused: evil.test:80 (no allow rule matches)"},
		{"unlisted port", "GET http://mirror.test:8080/ HTTP/1.1\r\nHost: mirror.test:8080\r\n\r\n", "covers ports 80 and 443 only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, _, _ := r.raw(t, c.request)
			wantRefused(t, resp, http.StatusForbidden, c.text)
		})
	}
	// Two Host headers: Go's request parser refuses them already.
	resp, _, _ := r.raw(t, "GET http://mirror.test/ HTTP/1.1\r\nHost: mirror.test\r\nhost: evil.test\r\n\r\n")
	wantRefused(t, resp, http.StatusBadRequest, "too many Host headers")
	time.Sleep(50 * time.Millisecond)
	if n := target.conns.Load(); n != 0 {
		t.Errorf("the target was reached %d times", n)
	}
}

// TestIPv6Literal: an IPv6 destination is judged by CIDR rules and then
// by the guard, and reached when both allow it.
func TestIPv6Literal(t *testing.T) {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	l.Close()
	echo := newEchoServer(t, "tcp", "[::1]:0")
	port := echo.Addr().(*net.TCPAddr).Port
	authority := "[::1]:" + strconv.Itoa(port)

	closed := newRig(t, rigConfig{allow: []string{"::1/128:*"}})
	resp, _, _ := closed.raw(t, "CONNECT "+authority+" HTTP/1.1\r\n\r\n")
	wantRefused(t, resp, http.StatusForbidden, "refused: "+authority+` (allow "::1/128:*" matches, but the network guard refused it: ::1 is not a public address (loopback (::1))`)

	open := newRig(t, rigConfig{allow: []string{"[::1]:*"}, guard: netguard.Options{AllowCIDRs: []string{"::1/128"}}})
	conn, br := open.connect(t, authority)
	io.WriteString(conn, "ping")
	got := make([]byte, 4)
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "ping" {
		t.Errorf("echo: %q %v", got, err)
	}
	// The same address spelt another way is still the same address.
	conn2, br2 := open.connect(t, "[0:0::1]:"+strconv.Itoa(port))
	io.WriteString(conn2, "pong")
	if _, err := io.ReadFull(br2, got); err != nil || string(got) != "pong" {
		t.Errorf("echo: %q %v", got, err)
	}
}

// TestUnreachable: a destination that cannot be reached is a 502 with the
// network's error, not a refusal.
func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	r := newRig(t, rigConfig{allow: []string{"mirror.test:*", "nowhere.test"}, guard: openGuard()})
	resp, _, _ := r.raw(t, "CONNECT mirror.test:"+strings.Split(addr, ":")[1]+" HTTP/1.1\r\n\r\n")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "connection refused") || resp.Header.Get("X-Toolsvc-Refused") != "" ||
		strings.Contains(string(body), "127.0.0.1") { // the address a name resolved to is not shown
		t.Errorf("%s %q", resp.Status, body)
	}
	resp, _, _ = r.raw(t, "CONNECT nowhere.test:443 HTTP/1.1\r\n\r\n")
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "could not resolve nowhere.test") {
		t.Errorf("%s %q", resp.Status, body)
	}
	if n := r.refusalCount(); n != 0 {
		t.Errorf("%d refusals reported", n)
	}
}

package netguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/toolerr"
)

// stubResolver answers from a map and counts lookups; it never sends a
// packet. Unknown names fail like NXDOMAIN.
type stubResolver struct {
	hosts map[string][]string
	calls atomic.Int32
}

func (s *stubResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	s.calls.Add(1)
	addrs, ok := s.hosts[strings.ToLower(host)]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []net.IPAddr
	for _, a := range addrs {
		out = append(out, net.IPAddr{IP: net.ParseIP(a)})
	}
	return out, nil
}

func newGuard(t *testing.T, opts Options) *Guard {
	t.Helper()
	g, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func wantDenied(t *testing.T, err error, substr ...string) {
	t.Helper()
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("want a guard refusal, got %v", err)
	}
	if code := toolerr.ErrorCode(err); code != toolerr.PolicyDenied {
		t.Fatalf("code %q", code)
	}
	for _, s := range substr {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q lacks %q", err.Error(), s)
		}
	}
}

// TestDecide covers the verdict on every range security.md lists, as a pure
// decision: no packet is sent.
func TestDecide(t *testing.T) {
	g := newGuard(t, Options{})
	denied := map[string]string{
		"127.0.0.1":                          "loopback",
		"127.255.255.254":                    "loopback",
		"10.0.0.1":                           "private",
		"172.16.0.1":                         "private",
		"172.31.255.255":                     "private",
		"192.168.1.1":                        "private",
		"169.254.169.254":                    "metadata",
		"169.254.170.2":                      "metadata",
		"169.254.1.1":                        "link-local",
		"100.64.0.1":                         "carrier-grade NAT",
		"100.100.100.200":                    "metadata",
		"0.0.0.0":                            "this network",
		"0.1.2.3":                            "this network",
		"224.0.0.1":                          "multicast",
		"239.255.255.250":                    "multicast",
		"255.255.255.255":                    "broadcast",
		"240.0.0.1":                          "reserved",
		"198.18.0.1":                         "benchmarking",
		"198.19.255.255":                     "benchmarking",
		"192.0.0.170":                        "IETF",
		"192.0.2.1":                          "documentation",
		"198.51.100.7":                       "documentation",
		"203.0.113.9":                        "documentation",
		"192.88.99.1":                        "6to4 relay",
		"::":                                 "unspecified",
		"::1":                                "loopback",
		"fe80::1":                            "link-local",
		"fe80::1%eth0":                       "link-local",
		"fc00::1":                            "unique local",
		"fd12:3456::1":                       "unique local",
		"fd00:ec2::254":                      "metadata",
		"fec0::1":                            "site-local",
		"ff02::1":                            "multicast",
		"::ffff:127.0.0.1":                   "loopback",
		"::ffff:a9fe:a9fe":                   "metadata",
		"::ffff:10.0.0.1":                    "private",
		"::127.0.0.1":                        "IPv4-compatible",
		"::a9fe:a9fe":                        "IPv4-compatible",
		"::ffff:0:7f00:1":                    "IPv4-translated",
		"64:ff9b::7f00:1":                    "NAT64",
		"64:ff9b::a9fe:a9fe":                 "metadata",
		"64:ff9b::c0a8:101":                  "NAT64",
		"64:ff9b:1::1":                       "local-use NAT64",
		"2002:7f00:1::":                      "6to4",
		"2002:a9fe:a9fe::1":                  "metadata",
		"2002:c0a8:101::1":                   "6to4",
		"2001:0:808:808::80ff:fffe":          "Teredo", // client 127.0.0.1 (inverted)
		"2001:0:a00:1::f7f7:fbfb":            "Teredo", // server 10.0.0.1
		"2001:db8::1":                        "documentation",
		"3fff::1":                            "documentation",
		"2001:2::1":                          "benchmarking",
		"100::1":                             "discard",
		"4000::1":                            "outside 2000::/3",
		"2001:10::1":                         "ORCHID",
		"5f00::1":                            "outside 2000::/3",
		"::ffff:198.18.0.1":                  "benchmarking",
		"2002:c612:1::":                      "benchmarking",
		"64:ff9b::6440:1":                    "carrier-grade NAT",
		"2001:0:808:808:ffff:ffff:ffbf:fffe": "Teredo", // client 0.64.0.1 ("this network")
	}
	for s, kind := range denied {
		t.Run("deny "+s, func(t *testing.T) {
			ip := netip.MustParseAddr(s)
			wantDenied(t, g.Decide(ip, ""), kind, "TOOLSVC_NET_ALLOW_CIDRS", "Next:")
		})
	}
	allowed := []string{
		"8.8.8.8", "1.1.1.1", "93.184.215.14", "100.0.0.1", "100.128.0.1", "172.32.0.1",
		"192.169.0.1", "198.20.0.1", "223.255.255.255", "169.253.0.1",
		"2606:4700:4700::1111", "2a00:1450:4001::200e", "::ffff:8.8.8.8",
		"64:ff9b::808:808", "2002:808:808::1", "2001:0:808:808::f7f7:fbfb",
	}
	for _, s := range allowed {
		t.Run("allow "+s, func(t *testing.T) {
			if err := g.Decide(netip.MustParseAddr(s), "example.com"); err != nil {
				t.Fatal(err)
			}
		})
	}
	if err := g.Decide(netip.Addr{}, ""); err == nil {
		t.Error("the zero address was allowed")
	}
}

// TestDecideExceptions checks what the operator's exceptions open, and that
// a host exception never opens a metadata endpoint.
func TestDecideExceptions(t *testing.T) {
	g := newGuard(t, Options{
		AllowCIDRs: []string{"10.1.0.0/16", "fd00:ec2::254", "192.168.5.5"},
		AllowHosts: []string{"Wiki.Corp.", "*.intra.example"},
	})
	cases := []struct {
		ip, host string
		ok       bool
	}{
		{"10.1.2.3", "", true},
		{"::ffff:10.1.2.3", "", true},
		{"10.2.0.1", "", false},
		{"192.168.5.5", "", true},
		{"192.168.5.6", "", false},
		{"fd00:ec2::254", "", true}, // metadata opened explicitly by CIDR
		{"10.9.9.9", "wiki.corp", true},
		{"10.9.9.9", "WIKI.corp.", true},
		{"127.0.0.1", "a.b.intra.example", true},
		{"127.0.0.1", "intra.example", false}, // *.x does not match x
		{"127.0.0.1", "evilintra.example", false},
		{"127.0.0.1", "wiki.corp.evil.com", false},
		{"169.254.169.254", "wiki.corp", false},    // metadata: CIDR only
		{"::ffff:a9fe:a9fe", "wiki.corp", false},   // in any spelling
		{"64:ff9b::a9fe:a9fe", "wiki.corp", false}, // even wrapped
		{"100.100.100.200", "x.intra.example", false},
	}
	for _, c := range cases {
		t.Run(c.ip+" "+c.host, func(t *testing.T) {
			err := g.Decide(netip.MustParseAddr(c.ip), c.host)
			if c.ok && err != nil {
				t.Fatalf("want allowed, got %v", err)
			}
			if !c.ok {
				wantDenied(t, err)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	bad := []Options{
		{AllowCIDRs: []string{"10.0.0.0/33"}},
		{AllowCIDRs: []string{"not-a-cidr"}},
		{AllowCIDRs: []string{"fe80::1%eth0"}},
		{AllowHosts: []string{"*"}},
		{AllowHosts: []string{"a*.b"}},
		{AllowHosts: []string{"http://x"}},
		{AllowHosts: []string{"*."}},
	}
	for i, o := range bad {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			_, err := New(o)
			if err == nil {
				t.Fatalf("%+v accepted", o)
			}
			if !strings.Contains(err.Error(), "TOOLSVC_NET_ALLOW_") {
				t.Errorf("error does not name the variable: %v", err)
			}
		})
	}
	if _, err := New(Options{AllowCIDRs: []string{"10.0.0.1/8", "::1"}, AllowHosts: []string{"*.a.b", "c"}}); err != nil {
		t.Fatal(err)
	}
}

// TestCheckURL covers schemes and literal hosts in every spelling.
func TestCheckURL(t *testing.T) {
	g := newGuard(t, Options{})
	denied := map[string]string{
		"file:///etc/passwd":                 "scheme",
		"ftp://example.com/":                 "scheme",
		"gopher://127.0.0.1:6379/_x":         "scheme",
		"data:text/html,hi":                  "scheme",
		"javascript:alert(1)":                "scheme",
		"chrome://settings":                  "scheme",
		"//example.com/x":                    "no scheme",
		"http://user:pw@example.com/":        "user name",
		"http:///path":                       "no host",
		"http://127.0.0.1/":                  "loopback",
		"http://127.0.0.1.:8080/":            "loopback",
		"http://[::1]/":                      "loopback",
		"http://[::ffff:127.0.0.1]/":         "loopback",
		"http://[::ffff:a9fe:a9fe]/latest":   "metadata",
		"http://[fe80::1%25eth0]/":           "link-local",
		"http://169.254.169.254/latest/meta": "metadata",
		"http://10.0.0.1/":                   "private",
		"http://0.0.0.0:8080/":               "this network",
		"http://2130706433/":                 "unusual notation",
		"http://0177.0.0.1/":                 "unusual notation",
		"http://0x7f.1/":                     "unusual notation",
		"http://0x7f000001/":                 "unusual notation",
		"http://127.1/":                      "unusual notation",
		"http://127.0.1/":                    "unusual notation",
		"http://0/":                          "unusual notation",
		"http://017700000001/":               "unusual notation",
		"http://0xA9.0xFE.0xA9.0xFE/":        "unusual notation",
		"http://2852039166/":                 "unusual notation", // 169.254.169.254
		"http://１２７.０.０.１/":                  "loopback",         // full-width digits
		"HTTP://127.0.0.1/":                  "loopback",
		"http://%31%32%37.0.0.1/":            "loopback",
	}
	for raw, want := range denied {
		t.Run(raw, func(t *testing.T) {
			u, err := url.Parse(raw)
			if err != nil {
				t.Skipf("url.Parse refuses it already: %v", err)
			}
			wantDenied(t, g.CheckURL(u), want)
		})
	}
	// A public address in an odd spelling is still refused, with the way
	// to write it.
	u, _ := url.Parse("http://134744072/")
	wantDenied(t, g.CheckURL(u), "write it as 8.8.8.8")
	for _, raw := range []string{
		"https://example.com/a?b=c", "http://8.8.8.8/", "https://[2606:4700::1111]/",
		"http://localhost/", // a name: judged on its addresses at dial time
		"http://0x.example.com/", "http://1.2.3.4.5/", "https://例子.测试/",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.CheckURL(u); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
	}
	// Messages never echo a query string, which may carry a token.
	u, _ = url.Parse("//host/x?token=s3cret")
	if err := g.CheckURL(u); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("got %v", err)
	}
}

func TestParseLooseIPv4(t *testing.T) {
	cases := map[string]string{
		"2130706433":      "127.0.0.1",
		"0177.0.0.1":      "127.0.0.1",
		"0x7f.1":          "127.0.0.1",
		"127.1":           "127.0.0.1",
		"10.1.65535":      "10.1.255.255",
		"0xc0.0xa8.0.1":   "192.168.0.1",
		"4294967295":      "255.255.255.255",
		"1.2.3.4":         "1.2.3.4",
		"0":               "0.0.0.0",
		"0x":              "0.0.0.0",
		"4294967296":      "",
		"1.2.3.256":       "",
		"1.2.65536":       "",
		"256.1":           "",
		"08.1.1.1":        "",
		"1..2":            "",
		"example.com":     "",
		"1.2.3.4.5":       "",
		"0x1g":            "",
		"99999999999999":  "",
		"0xffffffffffff1": "",
	}
	for in, want := range cases {
		ip, ok := parseLooseIPv4(in)
		got := ""
		if ok {
			got = ip.String()
		}
		if got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

// TestDialRefusesResolvedNames checks that a name is judged on what it
// resolves to when dialled, including a name that resolved public at check
// time and private now (rebinding). The stub resolver answers; every case
// is refused before a socket is opened.
func TestDialRefusesResolvedNames(t *testing.T) {
	r := &stubResolver{hosts: map[string][]string{
		"metadata.google.internal": {"169.254.169.254"},
		"intranet.test":            {"10.0.0.5"},
		"mixed.test":               {"8.8.8.8", "127.0.0.1"}, // one bad answer spoils the name
		"v6.test":                  {"fd00::1"},
		"mapped.test":              {"::ffff:192.168.0.1"},
		"rebind.test":              {"127.0.0.1"},
	}}
	g := newGuard(t, Options{Resolver: r})
	for host, want := range map[string]string{
		"metadata.google.internal:80": "metadata",
		"intranet.test:443":           "private",
		"mixed.test:80":               "loopback",
		"v6.test:80":                  "unique local",
		"mapped.test:80":              "private",
		"rebind.test:80":              "loopback",
		"127.0.0.1:80":                "loopback",
		"[::1]:80":                    "loopback",
		"2130706433:80":               "unusual notation",
		"0x7f.1:80":                   "unusual notation",
	} {
		t.Run(host, func(t *testing.T) {
			c, err := g.DialContext(context.Background(), "tcp", host)
			if c != nil {
				c.Close()
			}
			wantDenied(t, err, want)
			if strings.Contains(err.Error(), "10.0.0.5") || strings.Contains(err.Error(), "fd00::1") {
				t.Errorf("message reveals the resolved address: %v", err)
			}
		})
	}
	// Rebinding: the URL check passes (a name), the dial refuses (its
	// address now). The check and the dial are separate steps, as in a
	// real fetch.
	u, _ := url.Parse("http://rebind.test/")
	if err := g.CheckURL(u); err != nil {
		t.Fatal(err)
	}
	_, err := g.DialContext(context.Background(), "tcp", "rebind.test:80")
	wantDenied(t, err, "rebind.test resolves to a non-public address (loopback")
	if _, err := g.DialContext(context.Background(), "udp", "8.8.8.8:53"); err == nil {
		t.Error("udp allowed")
	}
}

// TestControlHook drives the dial-time hook directly with the addresses a
// socket could be about to connect to: the last line of defence, whatever
// resolved them.
func TestControlHook(t *testing.T) {
	g := newGuard(t, Options{AllowHosts: []string{"wiki.corp"}, AllowCIDRs: []string{"192.168.7.0/24"}})
	cases := []struct {
		host, addr string
		ok         bool
	}{
		{"example.com", "93.184.215.14:443", true},
		{"example.com", "127.0.0.1:443", false},
		{"example.com", "[::ffff:169.254.169.254]:80", false},
		{"example.com", "[fe80::1%eth0]:80", false},
		{"", "10.0.0.1:80", false},
		{"", "192.168.7.9:80", true},
		{"wiki.corp", "10.0.0.1:80", true},
		{"wiki.corp", "169.254.169.254:80", false},
		{"example.com", "garbage", false},
	}
	for _, c := range cases {
		t.Run(c.host+" "+c.addr, func(t *testing.T) {
			err := g.control(c.host)("tcp", c.addr, nil)
			if c.ok && err != nil {
				t.Fatal(err)
			}
			if !c.ok {
				wantDenied(t, err)
			}
		})
	}
}

// TestClientLoopback fetches through the guard from loopback servers only:
// opened by CIDR, opened by host name (the stub resolves it to loopback),
// refused when closed, a redirect from an allowed host to a loopback IP that
// is not allowed, a redirect to another scheme, and too many redirects.
func TestClientLoopback(t *testing.T) {
	var hits atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "hello")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	mux.HandleFunc("/to-ip", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:"+port+"/ok", http.StatusFound)
	})
	mux.HandleFunc("/to-file", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
	})
	mux.HandleFunc("/to-name", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://other.test:"+port+"/ok", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/chain", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ok", http.StatusMovedPermanently)
	})
	r := &stubResolver{hosts: map[string][]string{"allowed.test": {"127.0.0.1"}, "other.test": {"127.0.0.1"}}}

	get := func(g *Guard, raw string) (string, error) {
		u, _ := url.Parse(raw)
		if err := g.CheckURL(u); err != nil {
			return "", err
		}
		resp, err := g.Client(5*time.Second, 3).Get(raw)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}

	t.Run("open by CIDR", func(t *testing.T) {
		g := newGuard(t, Options{AllowCIDRs: []string{"127.0.0.0/8"}, Resolver: r})
		if body, err := get(g, srv.URL+"/chain"); err != nil || body != "hello" {
			t.Fatalf("%q %v", body, err)
		}
	})
	t.Run("open by host", func(t *testing.T) {
		g := newGuard(t, Options{AllowHosts: []string{"allowed.test"}, Resolver: r})
		if body, err := get(g, "http://allowed.test:"+port+"/ok"); err != nil || body != "hello" {
			t.Fatalf("%q %v", body, err)
		}
	})
	before := hits.Load()
	t.Run("closed", func(t *testing.T) {
		g := newGuard(t, Options{Resolver: r})
		_, err := get(g, srv.URL+"/ok")
		wantDenied(t, err, "loopback")
		// Bypass CheckURL: the dialer alone refuses too.
		_, err = g.Client(5*time.Second, 3).Get(srv.URL + "/ok")
		wantDenied(t, err, "loopback")
		_, err = g.Client(5*time.Second, 3).Get("http://other.test:" + port + "/ok")
		wantDenied(t, err, "other.test resolves to a non-public address (loopback")
	})
	g := newGuard(t, Options{AllowHosts: []string{"allowed.test"}, Resolver: r})
	t.Run("redirect to loopback IP", func(t *testing.T) {
		_, err := get(g, "http://allowed.test:"+port+"/to-ip")
		wantDenied(t, err, "Redirect to http://127.0.0.1:"+port+"/ok refused", "loopback")
	})
	t.Run("redirect to other name", func(t *testing.T) {
		_, err := get(g, "http://allowed.test:"+port+"/to-name")
		wantDenied(t, err, "other.test resolves to a non-public address (loopback")
	})
	t.Run("redirect to file", func(t *testing.T) {
		_, err := get(g, "http://allowed.test:"+port+"/to-file")
		wantDenied(t, err, "scheme")
	})
	t.Run("redirect loop", func(t *testing.T) {
		_, err := get(g, "http://allowed.test:"+port+"/loop")
		wantDenied(t, err, "more than 3 redirects")
	})
	if n := hits.Load() - before; n != 0 {
		t.Errorf("refused requests reached the server %d times", n)
	}
}

// TestTransportSettings pins what must not drift: no proxy from the
// environment, TLS verification on, the guarded dialer.
func TestTransportSettings(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	tr := newGuard(t, Options{}).Transport()
	if tr.Proxy != nil {
		t.Error("proxy from environment is on")
	}
	if tr.TLSClientConfig == nil || tr.TLSClientConfig.InsecureSkipVerify {
		t.Error("TLS verification is off")
	}
	//lint:ignore SA1019 the deprecated Dial must stay unset: it would bypass the guarded DialContext
	if tr.DialContext == nil || tr.Dial != nil || tr.DialTLSContext != nil {
		t.Error("dialer not guarded")
	}
	// TLS verification against a loopback server with a self-signed
	// certificate fails.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	g := newGuard(t, Options{AllowCIDRs: []string{"127.0.0.1"}})
	_, err := g.Client(5*time.Second, 1).Get(srv.URL)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("want a certificate error, got %v", err)
	}
}

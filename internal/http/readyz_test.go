package http

import (
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/registry"
)

func TestReadyzReportsChecks(t *testing.T) {
	checks := map[string]string{"workspace": "ok", "data_dir": "ok"}
	ok := true
	srv, _ := newTestServer(t, Options{Ready: func() (bool, map[string]string) { return ok, checks }})
	get := func() (int, readyBody) {
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b readyBody
		if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
	if code, b := get(); code != 200 || b.Status != "ready" || b.Checks["workspace"] != "ok" || b.Error != nil {
		t.Fatalf("ready: %d %+v", code, b)
	}
	ok = false
	checks = map[string]string{"workspace": "ok", "data_dir": "not writable: read-only file system", "free_space": "below the minimum"}
	code, b := get()
	if code != 503 || b.Status != "not_ready" || b.Error == nil || b.Error.Code != "not_ready" ||
		b.Error.Message != "not ready: data_dir: not writable: read-only file system; free_space: below the minimum" {
		t.Fatalf("not ready: %d %+v %+v", code, b, b.Error)
	}
}

// TestReadyzInFlightOnlyOnLoopback: the count of running calls, which the
// drain command reads, is given to callers on the service's machine only.
func TestReadyzInFlightOnlyOnLoopback(t *testing.T) {
	srv, _ := newTestServer(t, Options{})
	h := srv.Config.Handler
	for _, tc := range []struct {
		remote string
		want   bool
	}{
		{"127.0.0.1:40000", true},
		{"[::1]:40000", true},
		{"192.0.2.7:40000", false},
		{"10.1.2.3:40000", false},
		{"garbage", false},
	} {
		req := httptest.NewRequest(http.MethodGet, "http://localhost/readyz", nil)
		req.RemoteAddr = tc.remote
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var b readyBody
		if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.remote, rec.Code, rec.Body)
		}
		if got := b.InFlight != nil; got != tc.want || (got && *b.InFlight != 0) {
			t.Errorf("%s: in_flight %v; want given=%v (0)", tc.remote, b.InFlight, tc.want)
		}
	}
}

// readyReasons are the checks of a service that is not ready, with
// reasons of the kinds only the operator should read: an MCP server's
// stderr, an internal URL.
func readyReasons() map[string]string {
	return map[string]string{
		"workspace":  "ok",
		"data_dir":   "not writable: read-only file system",
		"free_space": "unavailable: unavailable on this platform",
		"mcp:memory": "down, restarting in the background: its stderr ended with:\nconnecting to http://10.0.0.5:9000/internal as svc-user",
	}
}

// reasonText is what of readyReasons no caller without the right to the
// reasons may see, in any field.
var reasonText = []string{"read-only", "stderr", "10.0.0.5", "svc-user", "restarting", "platform"}

// readyzHandler is the service's router with opts and an empty registry.
func readyzHandler(opts Options) http.Handler {
	opts.Registry = registry.New(registry.Options{})
	opts.Log = zerolog.Nop()
	return NewHandler(opts)
}

// getReadyz sends GET /readyz through h, the real router, as if from
// remote (the TCP peer net/http would have set), with the given headers.
func getReadyz(t *testing.T, h http.Handler, remote string, hdr map[string]string) (int, string, readyBody) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "http://toolsvc.internal/readyz", nil)
	req.RemoteAddr = remote
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var b readyBody
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
		t.Fatalf("%s: %d %s: %v", remote, rec.Code, rec.Body, err)
	}
	if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("%s: Cache-Control %q", remote, cc)
	}
	return rec.Code, rec.Body.String(), b
}

// TestReadyzReasonsOnlyForThoseWhoMay: a caller from the network without a
// valid key gets each check as "ok" or "down" and the same status (200 or
// 503) as anyone; a caller on the loopback, or one with a valid key,
// gets the reasons. A proxy's headers on a loopback connection make it
// the network's; on a connection from the network they make nobody
// local. Without keys, only the loopback gets the reasons.
//
// The peer is set as RemoteAddr on a request served by the real router
// (NewHandler): net/http sets RemoteAddr from the TCP connection, and the
// handler reads nothing else to place the caller. TestReadyzOverTheNetwork
// does the same over a real connection from a non-loopback address.
func TestReadyzReasonsOnlyForThoseWhoMay(t *testing.T) {
	const key, admin = "key-0123456789abcdef", "admin-0123456789abcdef"
	keyed := readyzHandler(Options{Keys: []Key{{Name: "agent", Secret: key}, {Name: "ops", Secret: admin, Admin: true}},
		Ready: func() (bool, map[string]string) { return false, readyReasons() }})
	open := readyzHandler(Options{Ready: func() (bool, map[string]string) { return false, readyReasons() }})
	full := "not ready: data_dir: not writable: read-only file system; mcp:memory: " + readyReasons()["mcp:memory"]
	bare := "not ready: data_dir: down; mcp:memory: down"
	for _, tc := range []struct {
		name    string
		h       http.Handler
		remote  string
		hdr     map[string]string
		reasons bool
		// local: in_flight is given too (the caller is on this machine,
		// not behind a proxy).
		local bool
	}{
		{"network, no key", keyed, "192.0.2.7:40000", nil, false, false},
		{"network, wrong key", keyed, "192.0.2.7:40000", map[string]string{"Authorization": "Bearer not-a-key-0123456789"}, false, false},
		{"network, key as Basic", keyed, "192.0.2.7:40000", map[string]string{"Authorization": "Basic " + key}, false, false},
		{"network, key", keyed, "192.0.2.7:40000", map[string]string{"Authorization": "Bearer " + key}, true, false},
		{"network, admin key", keyed, "[2001:db8::7]:40000", map[string]string{"Authorization": "bearer " + admin}, true, false},
		{"network, claims loopback", keyed, "10.1.2.3:40000", map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Real-Ip": "127.0.0.1"}, false, false},
		{"loopback", keyed, "127.0.0.1:40000", nil, true, true},
		{"loopback 127/8", keyed, "127.3.4.5:40000", nil, true, true},
		{"loopback IPv6", keyed, "[::1]:40000", nil, true, true},
		{"loopback IPv4-mapped", keyed, "[::ffff:127.0.0.1]:40000", nil, true, true},
		{"loopback, wrong key", keyed, "127.0.0.1:40000", map[string]string{"Authorization": "Bearer wrong"}, true, true},
		{"loopback via a proxy", keyed, "127.0.0.1:40000", map[string]string{"X-Forwarded-For": "192.0.2.7"}, false, false},
		{"loopback via a proxy (Forwarded)", keyed, "127.0.0.1:40000", map[string]string{"Forwarded": "for=192.0.2.7"}, false, false},
		{"loopback via a proxy (empty header)", keyed, "127.0.0.1:40000", map[string]string{"X-Real-Ip": ""}, false, false},
		{"loopback via a proxy, key", keyed, "127.0.0.1:40000", map[string]string{"X-Forwarded-For": "192.0.2.7", "Authorization": "Bearer " + key}, true, false},
		{"no address", keyed, "garbage", nil, false, false},
		{"open service, network", open, "192.0.2.7:40000", nil, false, false},
		{"open service, network, any bearer", open, "192.0.2.7:40000", map[string]string{"Authorization": "Bearer anything"}, false, false},
		{"open service, loopback", open, "127.0.0.1:40000", nil, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, raw, b := getReadyz(t, tc.h, tc.remote, tc.hdr)
			if code != http.StatusServiceUnavailable || b.Status != "not_ready" || b.Error == nil || b.Error.Code != "not_ready" {
				t.Fatalf("%d %s", code, raw)
			}
			want, wantMsg := readyReasons(), full
			if !tc.reasons {
				want = map[string]string{"workspace": "ok", "data_dir": "down", "free_space": "down", "mcp:memory": "down"}
				wantMsg = bare
				for _, s := range reasonText {
					if strings.Contains(raw, s) {
						t.Errorf("the body holds %q: %s", s, raw)
					}
				}
			}
			if !maps.Equal(b.Checks, want) || b.Error.Message != wantMsg {
				t.Errorf("checks %q, message %q; want %q, %q", b.Checks, b.Error.Message, want, wantMsg)
			}
			if (b.InFlight != nil) != tc.local {
				t.Errorf("in_flight %v; want given=%v", b.InFlight, tc.local)
			}
		})
	}
}

// TestReadyzReadyWithoutReasons: a service that is ready answers 200 to
// every caller; a check that is down without making it unready (an MCP
// server) is "down" for the network and says why to the loopback.
func TestReadyzReadyWithoutReasons(t *testing.T) {
	checks := map[string]string{"workspace": "ok", "mcp:memory": "down, restarting in the background: exit status 3"}
	h := readyzHandler(Options{Keys: []Key{{Name: "agent", Secret: "key-0123456789abcdef"}},
		Ready: func() (bool, map[string]string) { return true, checks }})
	code, raw, b := getReadyz(t, h, "192.0.2.7:40000", nil)
	if code != 200 || b.Status != "ready" || b.Error != nil || !maps.Equal(b.Checks, map[string]string{"workspace": "ok", "mcp:memory": "down"}) {
		t.Errorf("network: %d %s", code, raw)
	}
	code, raw, b = getReadyz(t, h, "127.0.0.1:40000", nil)
	if code != 200 || b.Status != "ready" || !maps.Equal(b.Checks, checks) {
		t.Errorf("loopback: %d %s", code, raw)
	}
}

// TestReadyzOverTheNetwork: through a real listener on an address of this
// machine that is not the loopback, the connection's peer is that
// address, and /readyz gives the reasons to a keyed caller only; through
// the loopback, to every caller. Skipped on a machine whose only address
// is the loopback (TestReadyzReasonsOnlyForThoseWhoMay covers the same
// decisions through the router).
func TestReadyzOverTheNetwork(t *testing.T) {
	addr := nonLoopbackAddr(t)
	const key = "key-0123456789abcdef"
	var mu sync.Mutex
	var peer string // the RemoteAddr the last request came with
	h := readyzHandler(Options{Keys: []Key{{Name: "agent", Secret: key}},
		Ready: func() (bool, map[string]string) { return false, readyReasons() }})
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		peer = r.RemoteAddr
		mu.Unlock()
		h.ServeHTTP(w, r)
	})
	for _, tc := range []struct {
		name     string
		listen   string
		key      string
		loopback bool
		reasons  bool
	}{
		{"network, no key", net.JoinHostPort(addr, "0"), "", false, false},
		{"network, key", net.JoinHostPort(addr, "0"), key, false, true},
		{"loopback, no key", "127.0.0.1:0", "", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", tc.listen)
			if err != nil {
				t.Skipf("cannot listen on %s: %v", tc.listen, err)
			}
			srv := httptest.NewUnstartedServer(record)
			srv.Listener.Close()
			srv.Listener = ln
			srv.Start()
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/readyz", nil)
			if tc.key != "" {
				req.Header.Set("Authorization", "Bearer "+tc.key)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			peer := peer
			mu.Unlock()
			host, _, _ := net.SplitHostPort(peer)
			if ip := net.ParseIP(host); ip == nil || ip.IsLoopback() != tc.loopback {
				t.Fatalf("the server saw the peer %v; want loopback=%v", peer, tc.loopback)
			}
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("%s %s", resp.Status, body)
			}
			has := strings.Contains(string(body), "read-only file system") && strings.Contains(string(body), "10.0.0.5")
			if has != tc.reasons {
				t.Errorf("peer %v: reasons given %v, want %v: %s", peer, has, tc.reasons, body)
			}
			if !tc.reasons && !strings.Contains(string(body), `"data_dir":"down"`) {
				t.Errorf("peer %v: %s", peer, body)
			}
		})
	}
}

// nonLoopbackAddr returns an address of this machine that is not a
// loopback or link-local one, or skips the test.
func nonLoopbackAddr(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("no interface addresses: %v", err)
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Skip("this machine has no IPv4 address but the loopback")
	return ""
}

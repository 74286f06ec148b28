package egress

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/countbot/toolsvc/internal/netguard"
)

// openGuard is a Guard that, as an operator's TOOLSVC_NET_ALLOW_HOSTS
// would, lets the test names reach loopback.
func openGuard() netguard.Options {
	return netguard.Options{AllowHosts: []string{"mirror.test", "echo.test", "xn--bcher-kva.test"}}
}

// TestHTTPSGoClient: Go's http.Client with Proxy set reaches an HTTPS
// server by name through CONNECT, port 443, with the SNI check passed.
func TestHTTPSGoClient(t *testing.T) {
	cert := newTestCert(t)
	srv := newTLSServer(t, cert, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s %s", r.Host, r.URL.Path)
	}))
	r := newRig(t, rigConfig{allow: []string{"mirror.test"}, guard: openGuard()})
	r.redirect("mirror.test", 443, srv.Listener.Addr().String())
	client := r.client(t, cert.pool)
	for i := range 3 { // the second and third reuse the tunnel
		resp, err := client.Get("https://mirror.test/path" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "hello mirror.test /path" + strconv.Itoa(i); string(body) != want {
			t.Fatalf("body %q, want %q", body, want)
		}
	}
	if snis := srv.seenSNIs(); len(snis) != 1 || snis[0] != "mirror.test" {
		t.Errorf("the server saw handshakes with SNI %q, want one with mirror.test", snis)
	}
	if n := r.refusalCount(); n != 0 {
		t.Errorf("%d refusals", n)
	}
}

// TestHTTPGoClient: plain HTTP requests in absolute form are forwarded,
// bodies streamed both ways in every framing, and the connection kept
// alive between requests.
func TestHTTPGoClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/sum": // the request body's length and SHA-256
			h := sha256.New()
			n, _ := io.Copy(h, r.Body)
			fmt.Fprintf(w, "%d %s %s", n, hex.EncodeToString(h.Sum(nil)), r.Header.Get("Content-Type"))
		case "/stream": // n bytes of unknown length, flushed as they go
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			chunk := strings.Repeat("x", 1000)
			for sent := 0; sent < n; sent += len(chunk) {
				io.WriteString(w, chunk[:min(len(chunk), n-sent)])
				w.(http.Flusher).Flush()
			}
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("X-Seen-Host", r.Host)
			io.WriteString(w, "plain "+r.URL.RequestURI())
		}
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, rigConfig{allow: []string{"mirror.test"}, guard: openGuard()})
	r.redirect("mirror.test", 80, srv.Listener.Addr().String())
	client := r.client(t, nil)
	var dials atomic.Int32
	tr := client.Transport.(*http.Transport)
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}

	get := func(u string) (*http.Response, string) {
		t.Helper()
		resp, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
	if resp, body := get("http://mirror.test/a/b?q=1&r=%2F"); body != "plain /a/b?q=1&r=%2F" || resp.Header.Get("X-Seen-Host") != "mirror.test" {
		t.Errorf("got %q, host %q", body, resp.Header.Get("X-Seen-Host"))
	}
	// A request body of unknown length (chunked), streamed through.
	payload := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < len(payload); i += 4096 {
			pw.Write([]byte(payload[i : i+4096]))
		}
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, "http://mirror.test/sum", pr)
	req.Header.Set("Content-Type", "application/x-test")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	h := sha256.Sum256([]byte(payload))
	if want := fmt.Sprintf("%d %s application/x-test", len(payload), hex.EncodeToString(h[:])); string(sum) != want {
		t.Errorf("server saw %q, want %q", sum, want)
	}
	// A response of unknown length comes back chunked, whole.
	if resp, body := get("http://mirror.test/stream?n=3000001"); len(body) != 3000001 || resp.ContentLength != -1 {
		t.Errorf("streamed %d bytes (content length %d)", len(body), resp.ContentLength)
	}
	if resp, body := get("http://mirror.test/empty"); resp.StatusCode != http.StatusNoContent || body != "" {
		t.Errorf("204: %d %q", resp.StatusCode, body)
	}
	resp, err = client.Head("http://mirror.test/x")
	if err != nil || resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len("plain /x")) {
		t.Errorf("HEAD: %v %+v", err, resp)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("the client dialled the proxy %d times for sequential requests; want 1 (keep-alive)", n)
	}
}

// TestHopByHopHeaders: the headers of one connection and the proxy's
// credentials do not go on, either way; the others do.
func TestHopByHopHeaders(t *testing.T) {
	var seen http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		w.Header().Set("Connection", "X-Resp-Hop")
		w.Header().Set("X-Resp-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("Proxy-Authenticate", "Basic")
		w.Header().Set("X-Resp-End", "kept")
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, rigConfig{allow: []string{"mirror.test"}, guard: openGuard()})
	r.redirect("mirror.test", 80, srv.Listener.Addr().String())
	resp, _, _ := r.raw(t, "GET http://mirror.test/ HTTP/1.1\r\nHost: mirror.test\r\n"+
		"Connection: keep-alive, X-Hop\r\nX-Hop: secret\r\nProxy-Authorization: Basic dXNlcjpwYXNz\r\n"+
		"Proxy-Connection: keep-alive\r\nKeep-Alive: 300\r\nTe: trailers\r\nUpgrade: websocket\r\n"+
		"X-End: kept\r\nAuthorization: Bearer for-the-server\r\n\r\n")
	io.Copy(io.Discard, resp.Body)
	for _, h := range []string{"X-Hop", "Proxy-Authorization", "Proxy-Connection", "Keep-Alive", "Te", "Upgrade", "Connection"} {
		if v, ok := seen[h]; ok {
			t.Errorf("the server got %s: %q", h, v)
		}
	}
	if seen.Get("X-End") != "kept" || seen.Get("Authorization") != "Bearer for-the-server" {
		t.Errorf("end-to-end headers lost: %v", seen)
	}
	if _, ok := seen["User-Agent"]; ok {
		t.Errorf("the proxy added a User-Agent: %q", seen["User-Agent"])
	}
	for _, h := range []string{"X-Resp-Hop", "Keep-Alive", "Proxy-Authenticate"} {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("the client got %s: %q", h, v)
		}
	}
	if resp.Header.Get("X-Resp-End") != "kept" {
		t.Errorf("response headers lost: %v", resp.Header)
	}
}

// TestNoRedirectFollowed: a redirect goes back to the client; the proxy
// does not follow it (the client's next request would be judged anew).
func TestNoRedirectFollowed(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, "http://evil.test/", http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, rigConfig{allow: []string{"mirror.test"}, guard: openGuard()})
	r.redirect("mirror.test", 80, srv.Listener.Addr().String())
	resp, err := r.client(t, nil).Get("http://mirror.test/go")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "http://evil.test/" || hits.Load() != 1 {
		t.Errorf("status %d, location %q, %d hits", resp.StatusCode, resp.Header.Get("Location"), hits.Load())
	}
}

// TestExpectContinue: the proxy answers 100 Continue itself, then
// forwards the body.
func TestExpectContinue(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "got %s expect=%q", b, r.Header.Get("Expect"))
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, rigConfig{allow: []string{"mirror.test"}, guard: openGuard()})
	r.redirect("mirror.test", 80, srv.Listener.Addr().String())
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST http://mirror.test/ HTTP/1.1\r\nHost: mirror.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("want 100 Continue first, got %q %v", line, err)
	}
	br.ReadString('\n') // the blank line
	io.WriteString(c, "hello")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != `got hello expect=""` {
		t.Errorf("got %q", body)
	}
}

// TestHTTP10Client: a response of unknown length goes to an HTTP/1.0
// client delimited by the end of the connection.
func TestHTTP10Client(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "part one, ")
		w.(http.Flusher).Flush()
		io.WriteString(w, "part two")
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, rigConfig{allow: []string{"mirror.test"}, guard: openGuard()})
	r.redirect("mirror.test", 80, srv.Listener.Addr().String())
	resp, _, _ := r.raw(t, "GET http://mirror.test/ HTTP/1.0\r\n\r\n")
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "part one, part two" || !resp.Close {
		t.Errorf("body %q, err %v, close %v", body, err, resp.Close)
	}
}

// TestIDNAHost: a name in Unicode is judged and dialled in its ASCII
// form, however the rule and the request spell it.
func TestIDNAHost(t *testing.T) {
	cert := newTestCert(t)
	srv := newTLSServer(t, cert, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello "+r.Host)
	}))
	r := newRig(t, rigConfig{allow: []string{"Bücher.test"}, guard: openGuard()})
	r.redirect("xn--bcher-kva.test", 443, srv.Listener.Addr().String())
	resp, err := r.client(t, cert.pool).Get("https://bücher.test/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello xn--bcher-kva.test" {
		t.Errorf("got %q", body)
	}
}

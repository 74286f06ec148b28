package egress

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/netguard"
)

// The tests never use real DNS or the network beyond loopback: names are
// resolved by stubResolver, destinations are loopback servers, and the
// proxy's dial is redirected from the port a client asked for (443, 80) to
// the port the test server listens on, still through the netguard Guard,
// which resolves the name and judges the address as it would in service.

// stubResolver answers from a map; an unknown name fails like NXDOMAIN.
type stubResolver map[string][]string

func (s stubResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	addrs, ok := s[strings.ToLower(host)]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []net.IPAddr
	for _, a := range addrs {
		out = append(out, net.IPAddr{IP: net.ParseIP(a)})
	}
	return out, nil
}

// testHosts is what the stub resolver knows.
func testHosts() stubResolver {
	return stubResolver{
		"mirror.test":        {"127.0.0.1"},
		"listed.test":        {"127.0.0.1"},
		"evil.test":          {"127.0.0.1"},
		"echo.test":          {"127.0.0.1"},
		"loopback.test":      {"127.0.0.1"},
		"meta.test":          {"169.254.169.254"},
		"xn--bcher-kva.test": {"127.0.0.1"},
	}
}

// rig is a proxy on loopback with its Guard, recording its refusals.
type rig struct {
	proxy *Proxy
	addr  string // the proxy's host:port
	guard *netguard.Guard

	mu        sync.Mutex
	redirects map[string]string // "mirror.test:443" -> "mirror.test:41234"
	refusals  []Refusal
	dials     atomic.Int32 // dials the proxy made, refused or not
}

type rigConfig struct {
	allow, deny []string
	guard       netguard.Options // Resolver is set to testHosts
	opts        Options          // Rules, Guard, OnRefusal and Log are set by the rig
}

func newRig(t testing.TB, cfg rigConfig) *rig {
	t.Helper()
	rules, err := ParseRules(cfg.allow, cfg.deny)
	if err != nil {
		t.Fatal(err)
	}
	cfg.guard.Resolver = testHosts()
	guard, err := netguard.New(cfg.guard)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{guard: guard, redirects: map[string]string{}}
	opts := cfg.opts
	opts.Rules, opts.Guard, opts.Log = rules, guard, zerolog.Nop()
	opts.OnRefusal = func(ref Refusal) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.refusals = append(r.refusals, ref)
	}
	r.proxy = New(opts)
	r.proxy.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		r.dials.Add(1)
		r.mu.Lock()
		if to, ok := r.redirects[addr]; ok {
			addr = to
		}
		r.mu.Unlock()
		return guard.DialContext(ctx, network, addr)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = l.Addr().String()
	served := make(chan error, 1)
	go func() { served <- r.proxy.Serve(l) }()
	t.Cleanup(func() {
		r.proxy.Close()
		if err := <-served; !errors.Is(err, ErrClosed) {
			t.Errorf("Serve returned %v, want ErrClosed", err)
		}
	})
	return r
}

// redirect makes the proxy's dial of host:port reach the server at
// serverAddr (a loopback host:port) instead, under the same name.
func (r *rig) redirect(host string, port int, serverAddr string) {
	_, realPort, err := net.SplitHostPort(serverAddr)
	if err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.redirects[net.JoinHostPort(host, strconv.Itoa(port))] = net.JoinHostPort(host, realPort)
}

func (r *rig) lastRefusal(t *testing.T) Refusal {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.refusals) == 0 {
		t.Fatal("OnRefusal was not called")
	}
	return r.refusals[len(r.refusals)-1]
}

func (r *rig) refusalCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.refusals)
}

// client is an http.Client that goes through the proxy, trusts the test
// certificate and follows no redirect.
func (r *rig) client(t testing.TB, pool *x509.CertPool) *http.Client {
	proxyURL, _ := url.Parse("http://" + r.addr)
	tr := &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: pool}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{
		Transport:     tr,
		Timeout:       20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// raw sends text on a new connection to the proxy and reads the answer.
func (r *rig) raw(t *testing.T, text string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, text); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: strings.Fields(text)[0]})
	if err != nil {
		t.Fatalf("reading the proxy's answer to %q: %v", strings.SplitN(text, "\r\n", 2)[0], err)
	}
	return resp, c, br
}

// wantRefused checks a refusal answer: status, and the same text in the
// reason phrase, the X-Toolsvc-Refused header and the body.
func wantRefused(t *testing.T, resp *http.Response, status int, text string) {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != status {
		t.Errorf("status %d, want %d (%s)", resp.StatusCode, status, body)
	}
	if h := resp.Header.Get("X-Toolsvc-Refused"); !strings.Contains(h, text) {
		t.Errorf("X-Toolsvc-Refused %q lacks %q", h, text)
	}
	if !strings.Contains(string(body), text) {
		t.Errorf("body %q lacks %q", body, text)
	}
	if !strings.Contains(resp.Status, text) {
		t.Errorf("status line %q lacks %q", resp.Status, text)
	}
}

// testCert is a self-signed certificate (its own root) for the test names.
type testCert struct {
	cert tls.Certificate
	pool *x509.CertPool
	pem  []byte
}

func newTestCert(t testing.TB) testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "egress test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		DNSNames:              []string{"mirror.test", "listed.test", "evil.test", "echo.test", "xn--bcher-kva.test"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return testCert{
		cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		pool: pool,
		pem:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}
}

// tlsServer is an HTTPS server on loopback that notes the SNI of each
// handshake.
type tlsServer struct {
	*httptest.Server
	mu   sync.Mutex
	snis []string
}

func newTLSServer(t testing.TB, cert testCert, h http.Handler) *tlsServer {
	s := &tlsServer{Server: httptest.NewUnstartedServer(h)}
	s.TLS = &tls.Config{
		Certificates: []tls.Certificate{cert.cert},
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.snis = append(s.snis, hello.ServerName)
			return nil, nil
		},
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *tlsServer) seenSNIs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.snis...)
}

// countingServer accepts TCP connections and counts them and the bytes
// they send, answering nothing: the destination an attack must not reach.
type countingServer struct {
	l     net.Listener
	conns atomic.Int32
	bytes atomic.Int64
	wg    sync.WaitGroup
}

func newCountingServer(t testing.TB) *countingServer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &countingServer{l: l}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				n, _ := io.Copy(io.Discard, c)
				s.bytes.Add(n)
			}()
		}
	}()
	t.Cleanup(func() { l.Close(); s.wg.Wait() })
	return s
}

func (s *countingServer) addr() string { return s.l.Addr().String() }

// echoServer echoes every byte back on each connection.
func newEchoServer(t testing.TB, network, addr string) net.Listener {
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { l.Close(); wg.Wait() })
	return l
}

// connect opens a tunnel through the proxy and checks the 200.
func (r *rig) connect(t testing.TB, authority string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "CONNECT "+authority+" HTTP/1.1\r\nHost: "+authority+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("CONNECT %s: %s %s", authority, resp.Status, body)
	}
	return c, br
}

// bufConn is a net.Conn that reads through a bufio.Reader holding bytes
// already read from it.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// waitFor polls cond for up to five seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

package browser

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/rs/zerolog"
)

// Guard is the network policy the proxy enforces. *netguard.Guard
// implements it; the browser package depends on this interface only, so its
// proxy can be tested on its own.
type Guard interface {
	// CheckURL refuses URLs the policy forbids before any connection.
	CheckURL(u *url.URL) error
	// DialContext connects only to addresses the policy allows, judging
	// every resolved IP at dial time.
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// Headers the proxy puts on the answers it makes itself, so the browser
// side can tell a refusal by the guard from a page's own 403 or 502.
const (
	headerDenied      = "X-Toolsvc-Denied"
	headerUnreachable = "X-Toolsvc-Unreachable"
)

// Proxy timeouts. A tunnel lives as long as the browser keeps it open; the
// browser closes idle sockets itself.
const (
	proxyDialTimeout   = 15 * time.Second
	proxyHeaderTimeout = 10 * time.Second
	proxyIdleTimeout   = 60 * time.Second
	maxRefusals        = 256
	tunnelDrainTimeout = 30 * time.Second
)

// Proxy is an HTTP proxy on 127.0.0.1 that the browser sends every request
// through: pages, subresources, redirects, iframes, fetch/XHR, WebSockets
// and workers. Plain http is forwarded; https and wss arrive as CONNECT
// tunnels, so TLS stays end to end between the browser and the site. The
// proxy connects only through the guard, so the guard judges the resolved
// address of every connection the page makes, whatever started it.
//
// Any local process can connect to a port on 127.0.0.1, so the proxy
// serves only clients that know the random secret made when it starts
// (proxy Basic credentials, which the browser gets through DevTools):
// anything else gets 407 before its target is looked at, and nothing is
// dialed.
type Proxy struct {
	guard Guard
	log   zerolog.Logger
	ln    net.Listener
	srv   *http.Server
	tr    *http.Transport
	rp    *httputil.ReverseProxy
	user  string
	pass  string
	auth  []byte // user:pass, what Proxy-Authorization must carry

	mu       sync.Mutex
	tunnels  map[net.Conn]struct{}
	refusals []Refusal // newest last, at most maxRefusals
	closed   bool
	wg       sync.WaitGroup
}

// Refusal is a connection the proxy did not make: the guard denied it
// (Denied) or the site could not be reached.
type Refusal struct {
	Host   string // lower-case host name or IP, without port
	Denied bool
	Reason string
	At     time.Time
}

// StartProxy listens on a random port of 127.0.0.1 and serves until Close.
func StartProxy(g Guard, log zerolog.Logger) (*Proxy, error) {
	if g == nil {
		return nil, errors.New("browser proxy: no network guard")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("browser proxy: %w", err)
	}
	p := &Proxy{guard: g, log: log, ln: ln, tunnels: map[net.Conn]struct{}{}, user: proxyUser, pass: rand.Text()}
	p.auth = []byte(p.user + ":" + p.pass)
	p.tr = &http.Transport{
		Proxy:                 nil, // never chain to the service's own proxy settings
		DialContext:           p.dial,
		MaxIdleConns:          32,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		DisableCompression:    true, // pass the site's encoding through untouched
	}
	p.rp = &httputil.ReverseProxy{
		// The request is already absolute (proxy form); ReverseProxy has
		// removed the hop-by-hop headers (Proxy-Connection and friends).
		Rewrite:       func(*httputil.ProxyRequest) {},
		Transport:     p.tr,
		FlushInterval: 100 * time.Millisecond,
		ErrorHandler:  p.forwardError,
		ErrorLog:      nil,
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: proxyHeaderTimeout,
		IdleTimeout:       proxyIdleTimeout,
		ErrorLog:          nil,
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

// proxyUser is the user name of the proxy's credentials; the password is
// the secret.
const proxyUser = "toolsvc"

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Credentials returns the user name and password the proxy asks for. They
// are made anew at every start and must never be shown to a page or put in
// a log.
func (p *Proxy) Credentials() (user, password string) { return p.user, p.pass }

// authorized reports whether r carries the proxy's credentials, compared
// in constant time.
func (p *Proxy) authorized(r *http.Request) bool {
	const prefix = "basic "
	h := r.Header.Get("Proxy-Authorization")
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return false
	}
	got, err := base64.StdEncoding.DecodeString(strings.TrimSpace(h[len(prefix):]))
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(got, p.auth) == 1
}

// Close stops the proxy and cuts every open tunnel.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.tunnels {
		c.Close()
	}
	p.mu.Unlock()
	err := p.srv.Close()
	p.tr.CloseIdleConnections()
	p.wg.Wait()
	return err
}

// Refused returns the refusals for host recorded at or after since, newest
// first.
func (p *Proxy) Refused(host string, since time.Time) (Refusal, bool) {
	host = strings.ToLower(host)
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.refusals) - 1; i >= 0; i-- {
		r := p.refusals[i]
		if r.At.Before(since) {
			break
		}
		if r.Host == host {
			return r, true
		}
	}
	return Refusal{}, false
}

// RefusedSince returns every refusal recorded at or after since, oldest
// first.
func (p *Proxy) RefusedSince(since time.Time) []Refusal {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Refusal
	for _, r := range p.refusals {
		if !r.At.Before(since) {
			out = append(out, r)
		}
	}
	return out
}

func (p *Proxy) refuse(host string, err error) Refusal {
	h := host
	if hh, _, splitErr := net.SplitHostPort(host); splitErr == nil {
		h = hh
	}
	r := Refusal{Host: strings.ToLower(strings.Trim(h, "[]")), Denied: isDenied(err), Reason: err.Error(), At: time.Now()}
	p.mu.Lock()
	p.refusals = append(p.refusals, r)
	if len(p.refusals) > maxRefusals {
		p.refusals = append(p.refusals[:0:0], p.refusals[len(p.refusals)-maxRefusals:]...)
	}
	p.mu.Unlock()
	p.log.Debug().Str("host", r.Host).Bool("denied", r.Denied).Str("reason", r.Reason).Msg("browser proxy refused a connection")
	return r
}

// isDenied reports whether err is the guard's policy refusal.
func isDenied(err error) bool {
	return toolerr.ErrorCode(err) == toolerr.PolicyDenied
}

// dial connects through the guard with a bounded time.
func (p *Proxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, proxyDialTimeout)
	defer cancel()
	return p.guard.DialContext(ctx, network, addr)
}

// ServeHTTP handles CONNECT tunnels and absolute-form http requests from
// the browser; a client without the credentials gets 407, and any other
// request (a page asking the proxy itself) is refused.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.authorized(r) {
		// The browser's first request in each browser context comes
		// without credentials and is answered this way too; DevTools then
		// hands them over and the browser asks again.
		p.log.Debug().Str("remote", r.RemoteAddr).Str("method", r.Method).Str("target", r.Host).Msg("browser proxy: request without the proxy credentials")
		w.Header().Set("Proxy-Authenticate", `Basic realm="toolsvc browser"`)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusProxyAuthRequired)
		io.WriteString(w, "this proxy serves the toolsvc browser only\n")
		return
	}
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Host == "" {
		http.Error(w, "this is a forward proxy; it serves proxied requests only", http.StatusBadRequest)
		return
	}
	if r.URL.Scheme != "http" {
		// https and wss come as CONNECT; anything else (ftp://) is refused.
		err := fmt.Errorf("the %s: scheme is not allowed; only http and https", r.URL.Scheme)
		p.deny(w, p.refuse(r.URL.Host, err))
		return
	}
	if err := p.guard.CheckURL(r.URL); err != nil {
		p.deny(w, p.refuse(r.URL.Host, err))
		return
	}
	p.rp.ServeHTTP(w, r)
}

// deny answers with 403, or 502 for an unreachable site, marked so the
// browser side recognises the proxy's own answer.
func (p *Proxy) deny(w http.ResponseWriter, r Refusal) {
	status, header := http.StatusForbidden, headerDenied
	if !r.Denied {
		status, header = http.StatusBadGateway, headerUnreachable
	}
	w.Header().Set(header, oneLine(r.Reason))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintf(w, "toolsvc refused this connection: %s\n", r.Reason)
}

func (p *Proxy) forwardError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return // the browser went away
	}
	p.deny(w, p.refuse(r.URL.Host, err))
}

// connect opens a tunnel to the CONNECT target through the guard.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if _, port, err := net.SplitHostPort(host); err != nil || port == "" {
		http.Error(w, "CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	// The guard's URL check knows only http and https; a tunnel carries
	// https or wss, which are judged alike.
	if err := p.guard.CheckURL(&url.URL{Scheme: "https", Host: host}); err != nil {
		p.deny(w, p.refuse(host, err))
		return
	}
	up, err := p.dial(r.Context(), "tcp", host)
	if err != nil {
		p.deny(w, p.refuse(host, err))
		return
	}
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		return
	}
	if !p.track(conn, up) {
		conn.Close()
		up.Close()
		return
	}
	defer p.untrack(conn, up)
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	splice(conn, buf.Reader, up)
}

// track registers a tunnel's two ends so Close can cut them; it refuses
// once the proxy is closed.
func (p *Proxy) track(a, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.tunnels[a] = struct{}{}
	p.tunnels[b] = struct{}{}
	return true
}

func (p *Proxy) untrack(a, b net.Conn) {
	p.mu.Lock()
	delete(p.tunnels, a)
	delete(p.tunnels, b)
	p.mu.Unlock()
	a.Close()
	b.Close()
}

// splice copies both ways until either side ends. The browser side's
// reader may hold bytes read past the CONNECT request (a TLS hello).
func splice(client net.Conn, clientR *bufio.Reader, up net.Conn) {
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(up, clientR)
		closeWrite(up)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(client, up)
		closeWrite(client)
		done <- struct{}{}
	}()
	<-done
	// One side has finished; give the other a bounded time to drain, so a
	// peer that never closes cannot hold the tunnel forever.
	deadline := time.Now().Add(tunnelDrainTimeout)
	_ = client.SetDeadline(deadline)
	_ = up.SetDeadline(deadline)
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// oneLine makes text safe for a header value.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

// Package egress is the forward proxy that is a sandboxed command's only
// way out of its network namespace: the command finds it through
// HTTP_PROXY, HTTPS_PROXY and ALL_PROXY (an http:// URL: the proxy speaks
// HTTP proxying, not SOCKS; curl reads http_proxy in lower case only, so
// both spellings are wanted) and may reach, by name, only the destinations
// its Rules allow. It speaks CONNECT host:port (HTTPS and anything
// tunnelled) and plain HTTP requests in absolute form ("GET
// http://host/path"); it resolves every name itself (the namespace has no
// resolver) and dials only through the service's netguard.Guard, so a
// listed name that resolves to loopback, a private range or a metadata
// endpoint is still refused. A tunnel to port 443 must begin with a TLS
// ClientHello that names the host the CONNECT named, so that an allowed
// name cannot front for another.
//
// Every refusal is an HTTP answer whose status line, X-Toolsvc-Refused
// header and body say "refused: host:port (why)", so that the command's
// own error (curl's, npm's, pip's) shows the reason, and is reported to
// Options.OnRefusal for the tool result and the audit record.
//
// What the proxy cannot see, it does not judge: a command that ignores the
// proxy variables and connects directly is stopped by its network
// namespace, which has no other way out.
package egress

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/netguard"
)

// Defaults of Options' zero values.
const (
	DefaultDialTimeout   = 30 * time.Second
	DefaultIdleTimeout   = 2 * time.Minute
	DefaultHeaderTimeout = 30 * time.Second
	// DefaultMaxConns is well above what package managers open at once:
	// npm 9 opens a tunnel per package it fetches, all at once, and an
	// MCP server's hundred dependencies went past 64.
	DefaultMaxConns       = 512
	DefaultMaxHeaderBytes = 64 << 10
)

// busyAnswers bounds the connections answered "too many connections" at
// once; beyond them a connection over the limit is closed unanswered.
const busyAnswers = 8

// ErrClosed is what Serve returns once Close was called.
var ErrClosed = errors.New("egress: proxy closed")

// Options configure a Proxy. Zero values take the defaults above.
type Options struct {
	// Rules decide which destinations are allowed; nil refuses all.
	Rules *Rules
	// Guard dials every connection and refuses non-public addresses
	// unless the operator opened them; nil is a guard without exceptions.
	Guard *netguard.Guard
	// DialTimeout bounds resolving and connecting to a destination.
	DialTimeout time.Duration
	// IdleTimeout closes a tunnel or a forwarded request that moved no
	// byte either way for this long, and a client connection that sent no
	// new request for this long after its last one.
	IdleTimeout time.Duration
	// HeaderTimeout bounds reading a connection's first request head, and
	// the TLS ClientHello at the start of a tunnel to port 443.
	HeaderTimeout time.Duration
	// MaxConns bounds the client connections served at once; one more is
	// answered 503 with the reason.
	MaxConns int
	// MaxHeaderBytes bounds a request head (request line and headers);
	// a longer one is answered 431.
	MaxHeaderBytes int
	// Log receives a line per refusal (info) and per destination reached
	// (debug).
	Log zerolog.Logger
	// OnRefusal, if set, is called once per refusal, from the connection's
	// goroutine: it must be safe for concurrent use and return quickly.
	OnRefusal func(Refusal)
}

// Proxy is one forward proxy, typically serving one command's namespace.
type Proxy struct {
	rules         *Rules
	dialTimeout   time.Duration
	idleTimeout   time.Duration
	headerTimeout time.Duration
	maxConns      int
	maxHeader     int
	log           zerolog.Logger
	onRefusal     func(Refusal)

	// dial connects to a destination; it is the guard's DialContext, which
	// tests wrap to reach their loopback servers on other ports.
	dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	transport *http.Transport
	bufs      sync.Pool // *[]byte of copyBufSize, for tunnels and bodies

	slots chan struct{} // one per connection being served
	busy  chan struct{} // one per connection being told "too many"

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{} // clients and destinations, closed by Close
	wg        sync.WaitGroup        // one per goroutine serving a connection
}

// copyBufSize is the buffer of one direction of a tunnel or a body copy.
const copyBufSize = 32 << 10

// smallHead is the reader a connection starts with: room for the request
// heads of curl, npm and pip, and the bytes that follow them.
const smallHead = 4 << 10

// New builds a Proxy; it serves nothing until Serve.
func New(opts Options) *Proxy {
	guard := opts.Guard
	if guard == nil {
		// No exceptions cannot fail to parse.
		guard, _ = netguard.New(netguard.Options{})
	}
	p := &Proxy{
		rules:         opts.Rules,
		dialTimeout:   orDefault(opts.DialTimeout, DefaultDialTimeout),
		idleTimeout:   orDefault(opts.IdleTimeout, DefaultIdleTimeout),
		headerTimeout: orDefault(opts.HeaderTimeout, DefaultHeaderTimeout),
		maxConns:      orDefault(opts.MaxConns, DefaultMaxConns),
		maxHeader:     orDefault(opts.MaxHeaderBytes, DefaultMaxHeaderBytes),
		log:           opts.Log,
		onRefusal:     opts.OnRefusal,
		dial:          guard.DialContext,
		listeners:     map[net.Listener]struct{}{},
		conns:         map[net.Conn]struct{}{},
	}
	p.bufs.New = func() any { b := make([]byte, copyBufSize); return &b }
	p.slots = make(chan struct{}, p.maxConns)
	p.busy = make(chan struct{}, busyAnswers)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.transport = &http.Transport{
		Proxy:                  nil,
		DialContext:            p.dialDestination,
		DisableCompression:     true, // pass Accept-Encoding and the body as they are
		MaxIdleConns:           p.maxConns,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        p.idleTimeout,
		MaxResponseHeaderBytes: 1 << 20,
	}
	return p
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// dialDestination dials host:port through the guard within DialTimeout.
func (p *Proxy) dialDestination(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.dialTimeout)
	defer cancel()
	return p.dial(ctx, network, addr)
}

// Serve accepts client connections on l until Close (then it returns
// ErrClosed) or until l fails for good. It assumes nothing of l but that
// it is a stream listener; l may be served by one Serve only, and several
// listeners by one Proxy.
func (p *Proxy) Serve(l net.Listener) error {
	if !p.addListener(l) {
		l.Close()
		return ErrClosed
	}
	defer p.removeListener(l)
	var delay time.Duration
	for {
		c, err := l.Accept()
		if err == nil {
			delay = 0
			p.admit(c)
			continue
		}
		if p.isClosed() {
			return ErrClosed
		}
		if errors.Is(err, net.ErrClosed) {
			return err
		}
		// Out of descriptors or a connection aborted before it was
		// accepted: wait and try again, as net/http does.
		delay = min(max(2*delay, 5*time.Millisecond), time.Second)
		p.log.Warn().Err(err).Dur("retry_in", delay).Msg("egress proxy: accept failed")
		select {
		case <-time.After(delay):
		case <-p.ctx.Done():
			return ErrClosed
		}
	}
}

// admit starts serving c, or tells it that too many are being served.
func (p *Proxy) admit(c net.Conn) {
	select {
	case p.slots <- struct{}{}:
		if !p.track(c) {
			<-p.slots
			c.Close()
			return
		}
		go func() {
			defer p.wg.Done()
			defer func() { <-p.slots }()
			defer p.untrack(c)
			p.serveConn(c)
		}()
		return
	default:
	}
	select {
	case p.busy <- struct{}{}:
		if !p.track(c) {
			<-p.busy
			c.Close()
			return
		}
		go func() {
			defer p.wg.Done()
			defer func() { <-p.busy }()
			defer p.untrack(c)
			p.refuseBusy(c)
		}()
	default:
		c.Close()
	}
}

// Close stops every Serve, closes every connection (tunnels and requests
// under way end at once), and returns when every goroutine the proxy
// started has ended. It returns nil (a Proxy is an io.Closer).
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		for l := range p.listeners {
			l.Close()
		}
		for c := range p.conns {
			c.Close()
		}
	}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.transport.CloseIdleConnections()
	return nil
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *Proxy) addListener(l net.Listener) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.listeners[l] = struct{}{}
	return true
}

func (p *Proxy) removeListener(l net.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.listeners, l)
}

// track registers a client connection and its goroutine (wg), unless the
// proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	p.wg.Add(1)
	return true
}

// trackConn registers a destination connection so that Close closes it;
// false (and c closed) when the proxy is closed already.
func (p *Proxy) trackConn(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// untrack forgets and closes a connection.
func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// serveConn reads requests from one client connection: CONNECT turns it
// into a tunnel, a plain request is forwarded and the next one read while
// the client keeps the connection alive.
func (p *Proxy) serveConn(c net.Conn) {
	br := bufio.NewReaderSize(c, min(p.maxHeader, smallHead))
	timeout := p.headerTimeout
	for {
		req, hosts, bigger, err := p.readRequest(c, br, timeout)
		br = bigger
		if err != nil {
			p.answerUnreadable(c, err)
			return
		}
		if req.Method == http.MethodConnect {
			p.connect(c, br, req)
			return
		}
		if !p.forward(c, req, hosts) {
			return
		}
		timeout = p.idleTimeout
	}
}

// getBuf and putBuf lend copy buffers.
func (p *Proxy) getBuf() *[]byte  { return p.bufs.Get().(*[]byte) }
func (p *Proxy) putBuf(b *[]byte) { p.bufs.Put(b) }

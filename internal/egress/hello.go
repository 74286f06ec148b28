package egress

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/countbot/toolsvc/internal/runes"
)

// maxClientHello bounds what the proxy reads of a tunnel to port 443
// before it has judged the ClientHello: one whole TLS record (16 KiB of
// handshake and its 5-byte header). Today's ClientHellos, post-quantum key
// shares included, take under 2 KiB.
const maxClientHello = 16<<10 + 5

// tlsAccessDenied is a fatal TLS alert, access_denied, sent in place of
// the ServerHello when the ClientHello is refused.
var tlsAccessDenied = []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31}

// errHelloRead stops crypto/tls once it has parsed the ClientHello.
var errHelloRead = errors.New("ClientHello read")

// checkHello reads the ClientHello a client sends into a tunnel to port
// 443 and checks its server name (SNI) against the destination: for a
// name, the SNI must be that name (so that an allowed name cannot front
// for another host on the same servers) and must be there; for an IP
// address, an SNI, if any, must be allowed by the rules itself. It
// returns the bytes read, to be sent on unchanged, or why the tunnel is
// refused. A ClientHello that uses Encrypted Client Hello is judged by its
// outer SNI, the only one the proxy can read.
func (p *Proxy) checkHello(c net.Conn, br *bufio.Reader, t target) (hello []byte, why string) {
	c.SetReadDeadline(time.Now().Add(p.headerTimeout))
	defer c.SetReadDeadline(time.Time{})
	sni, hello, err := readClientHello(br)
	switch {
	case err == nil:
		return hello, p.judgeSNI(t, sni)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, fmt.Sprintf("no TLS ClientHello within %s of opening a tunnel to port 443", p.headerTimeout)
	case len(hello) >= maxClientHello:
		return nil, fmt.Sprintf("the TLS ClientHello is over %d bytes", maxClientHello)
	default:
		return nil, "a tunnel to port 443 must carry TLS, and this one did not begin with a valid TLS ClientHello (" +
			runes.Shorten(err.Error(), runes.Echo) + ")"
	}
}

// judgeSNI says why sni is refused for a tunnel to t, or "".
func (p *Proxy) judgeSNI(t target, sni string) string {
	if sni == "" {
		if t.ip.IsValid() {
			return ""
		}
		return fmt.Sprintf("the TLS ClientHello names no server (no SNI); a tunnel to %s must name %s", t.host, t.host)
	}
	name, ip, ok := canonicalHost(sni)
	switch {
	case !ok:
		return fmt.Sprintf("the TLS ClientHello's server name %q is not a valid host name", runes.Shorten(sni, runes.Echo))
	case !t.ip.IsValid() && name == t.host:
		return ""
	case !t.ip.IsValid():
		return fmt.Sprintf("the TLS ClientHello names %s (SNI), not %s, the host the CONNECT named", name, t.host)
	case ip == t.ip:
		return ""
	}
	if d := p.rules.decide(name, ip, t.port); !d.Allowed {
		return fmt.Sprintf("the TLS ClientHello names %s (SNI), which the rules do not allow (%s)", name, d.Rule)
	}
	return ""
}

// readClientHello reads one TLS ClientHello from r with crypto/tls's own
// parser, stopped as soon as the hello is parsed, and returns its server
// name and every byte read from r (the hello, and anything read with it).
// Nothing is written back. It reads at most maxClientHello bytes.
func readClientHello(r io.Reader) (sni string, read []byte, err error) {
	hc := &helloConn{r: io.LimitReader(r, maxClientHello)}
	seen := false
	srv := tls.Server(hc, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni, seen = h.ServerName, true
			return nil, errHelloRead
		},
	})
	err = srv.Handshake()
	if seen {
		return sni, hc.read, nil
	}
	return "", hc.read, err
}

// helloConn is the net.Conn crypto/tls reads a ClientHello from: reads
// come from r and are kept; writes (an alert) and deadlines go nowhere.
type helloConn struct {
	r    io.Reader
	read []byte
}

func (h *helloConn) Read(b []byte) (int, error) {
	n, err := h.r.Read(b)
	h.read = append(h.read, b[:n]...)
	return n, err
}

func (h *helloConn) Write(b []byte) (int, error)      { return len(b), nil }
func (h *helloConn) Close() error                     { return nil }
func (h *helloConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (h *helloConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (h *helloConn) SetDeadline(time.Time) error      { return nil }
func (h *helloConn) SetReadDeadline(time.Time) error  { return nil }
func (h *helloConn) SetWriteDeadline(time.Time) error { return nil }

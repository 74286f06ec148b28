package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/countbot/toolsvc/internal/netguard"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// target is a destination the rules allowed.
type target struct {
	host string     // canonical: lower-case IDNA ASCII name, or an IP address
	ip   netip.Addr // set when host is an IP address
	port int
	rule string // the Decision text that allowed it
}

// addr is host:port for dialling.
func (t target) addr() string { return net.JoinHostPort(t.host, strconv.Itoa(t.port)) }

// judge checks a destination as the client wrote it against the rules.
func (p *Proxy) judge(method, host, port string) (target, *Refusal) {
	r := &Refusal{Method: method, Host: host, Status: http.StatusForbidden}
	n, ok := parsePort(port)
	if !ok {
		r.Reason = notAPort
		return target{}, r
	}
	r.Port = n
	name, ip, ok := canonicalHost(host)
	if !ok {
		r.Reason = notAHostName
		return target{}, r
	}
	r.Host = name
	d := p.rules.decide(name, ip, n)
	if !d.Allowed {
		r.Rule, r.Reason = d.Rule, d.Rule
		return target{}, r
	}
	return target{host: name, ip: ip, port: n, rule: d.Rule}, nil
}

// failure is why a destination the rules allowed could not be reached:
// the guard's refusal (403, reported as a refusal) or a network error
// (502, or 504 when it timed out).
func (p *Proxy) failure(c net.Conn, method string, t target, err error) {
	var refused *toolerr.Error
	if errors.Is(err, netguard.ErrRefused) && errors.As(err, &refused) {
		why := strings.TrimPrefix(refused.Message, "Refused: ")
		p.refuse(c, Refusal{Method: method, Host: t.host, Port: t.port, Rule: t.rule, Status: http.StatusForbidden,
			Reason: t.rule + " matches, but the network guard refused it: " + why})
		return
	}
	status := http.StatusBadGateway
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, errIdle) {
		status = http.StatusGatewayTimeout
	}
	msg := fmt.Sprintf("egress: could not reach %s: %s", t.addr(), runes.Shorten(networkError(err), runes.Echo))
	p.log.Info().Str("method", method).Str("host", t.host).Int("port", t.port).Err(err).Msg("egress: destination unreachable")
	p.answer(c, status, msg, false)
}

// networkError is what the command is told of a failed dial: the
// system's words ("connect: connection refused") without the address a
// name resolved to, which the guard does not show either (it would map
// internal names for whoever steers the command).
func networkError(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}

// connect serves a CONNECT: judge, dial through the guard, answer 200,
// check the ClientHello of a tunnel to port 443, then splice.
func (p *Proxy) connect(c net.Conn, br *bufio.Reader, req *http.Request) {
	host, port, err := net.SplitHostPort(req.URL.Host)
	if err != nil || req.URL.Host == "" {
		p.refuse(c, Refusal{Method: req.Method, Host: req.URL.Host, Status: http.StatusBadRequest,
			Reason: "CONNECT needs a destination as host:port, such as registry.npmjs.org:443"})
		return
	}
	t, refusal := p.judge(req.Method, host, port)
	if refusal != nil {
		p.refuse(c, *refusal)
		return
	}
	up, err := p.dialDestination(p.ctx, "tcp", t.addr())
	if err != nil {
		p.failure(c, req.Method, t, err)
		return
	}
	if !p.trackConn(up) {
		return
	}
	defer p.untrack(up)
	c.SetWriteDeadline(time.Now().Add(p.headerTimeout))
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	c.SetWriteDeadline(time.Time{})
	if t.port == 443 {
		hello, why := p.checkHello(c, br, t)
		if why != "" {
			p.refuse(c, Refusal{Method: req.Method, Host: t.host, Port: t.port, Rule: t.rule, Reason: why})
			// A TLS alert, so that the client's error says "access denied"
			// rather than that the connection was closed.
			c.SetWriteDeadline(time.Now().Add(p.headerTimeout))
			if _, err := c.Write(tlsAccessDenied); err == nil {
				lingerClose(c)
			}
			return
		}
		if _, err := up.Write(hello); err != nil {
			return
		}
	}
	p.log.Debug().Str("host", t.host).Int("port", t.port).Str("rule", t.rule).Msg("egress tunnel")
	p.splice(c, br, up)
}

// errIdle: nothing moved either way for IdleTimeout.
var errIdle = errors.New("idle for too long")

// splice copies both ways between the client (read through br, which may
// hold bytes already) and the destination until both sides have finished
// or nothing moved either way for IdleTimeout. A side that finishes
// sending has its end closed for writing on the other, so that
// half-closed protocols work.
func (p *Proxy) splice(c net.Conn, br *bufio.Reader, up net.Conn) {
	var last atomic.Int64 // UnixNano of the last byte either way
	last.Store(time.Now().UnixNano())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := p.pipe(c, up, up, &last); err != nil {
			c.Close()
			up.Close()
		}
	}()
	if err := p.pipe(up, c, br, &last); err != nil {
		c.Close()
		up.Close()
	}
	<-done
}

// pipe copies from r (reading src) to dst. A read that times out ends the
// pipe only when neither direction moved for IdleTimeout; a write is
// bounded by IdleTimeout too. EOF closes dst for writing and is no error.
func (p *Proxy) pipe(dst, src net.Conn, r io.Reader, last *atomic.Int64) error {
	bp := p.getBuf()
	defer p.putBuf(bp)
	buf := *bp
	src.SetReadDeadline(time.Now().Add(p.idleTimeout))
	for {
		n, err := r.Read(buf)
		if n > 0 {
			now := time.Now()
			last.Store(now.UnixNano())
			dst.SetWriteDeadline(now.Add(p.idleTimeout))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			deadline := time.Unix(0, last.Load()).Add(p.idleTimeout)
			if !time.Now().Before(deadline) {
				return errIdle
			}
			src.SetReadDeadline(deadline)
		case errors.Is(err, io.EOF):
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
			return nil
		default:
			return err
		}
	}
}

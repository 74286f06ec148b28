package egress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/countbot/toolsvc/internal/runes"
)

// forward serves one plain HTTP request in absolute form ("GET
// http://host/path"): judge its URL, check its Host header, send it on
// through the guard (without following redirects: a redirect goes back to
// the client, whose next request is judged anew) and stream the answer
// back. It reports whether the connection may carry another request.
func (p *Proxy) forward(c net.Conn, req *http.Request, hosts []string) bool {
	t, refusal := p.judgeRequest(req, hosts)
	if refusal != nil {
		p.refuse(c, *refusal)
		return false
	}
	if req.ContentLength != 0 && strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		// Answered here: the destination gets the body without asking.
		req.Header.Del("Expect")
		c.SetWriteDeadline(time.Now().Add(p.headerTimeout))
		if _, err := io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return false
		}
	}
	w := p.newWatch()
	defer w.stop()
	body := &watchedBody{r: req.Body, w: w}
	resp, err := p.transport.RoundTrip(outgoing(w.ctx, req, t, body))
	if err != nil {
		if cause := context.Cause(w.ctx); errors.Is(cause, errIdle) {
			err = cause
		}
		p.failure(c, req.Method, t, err)
		return false
	}
	defer resp.Body.Close()
	p.log.Debug().Str("method", req.Method).Str("host", t.host).Int("port", t.port).Str("rule", t.rule).
		Int("status", resp.StatusCode).Msg("egress request")
	keep := p.writeResponse(c, req, resp, w)
	// Another request may be read only once the transport has read all of
	// this one's body from the connection's reader.
	return keep && (req.ContentLength == 0 || body.eof.Load())
}

// judgeRequest checks a plain request: absolute http:// URL, allowed by
// the rules, and a Host header, if any, naming the same host and port.
func (p *Proxy) judgeRequest(req *http.Request, hosts []string) (target, *Refusal) {
	u := req.URL
	if u.Host == "" {
		host, port, err := net.SplitHostPort(req.Host)
		if err != nil {
			host, port = req.Host, "80"
		}
		n, _ := parsePort(port)
		return target{}, &Refusal{Method: req.Method, Host: host, Port: n, Status: http.StatusForbidden,
			Reason: "not a proxy request: send CONNECT host:port, or a request for an absolute http:// URL (set HTTP_PROXY and HTTPS_PROXY)"}
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	if u.Scheme != "http" {
		n, _ := parsePort(port)
		return target{}, &Refusal{Method: req.Method, Host: u.Hostname(), Port: n, Status: http.StatusForbidden,
			Reason: fmt.Sprintf("only http:// URLs are forwarded; for %s:// send CONNECT (HTTPS_PROXY)", runes.Shorten(u.Scheme, 20))}
	}
	t, refusal := p.judge(req.Method, u.Hostname(), port)
	if refusal != nil {
		return t, refusal
	}
	if why := hostMismatch(hosts, t); why != "" {
		return target{}, &Refusal{Method: req.Method, Host: t.host, Port: t.port, Rule: t.rule, Status: http.StatusForbidden, Reason: why}
	}
	return t, nil
}

// hostMismatch says why the Host header lines do not name t, or "". No
// Host line is no mismatch (HTTP/1.0): the URL's host is sent on.
func hostMismatch(hosts []string, t target) string {
	switch len(hosts) {
	case 0:
		return ""
	case 1:
	default:
		return "the request has more than one Host header"
	}
	host, port, err := net.SplitHostPort(hosts[0])
	if err != nil {
		host, port = hosts[0], "80"
	}
	name, ip, ok := canonicalHost(host)
	n, portOK := parsePort(port)
	same := ok && portOK && n == t.port && (name == t.host || ip.IsValid() && ip == t.ip)
	if same {
		return ""
	}
	return fmt.Sprintf("the Host header names %s, not %s, the host and port of the request's URL",
		runes.Shorten(hosts[0], runes.Echo), t.addr())
}

// outgoing is the request sent on: the client's, to the judged host, less
// its hop-by-hop and proxy headers and any user:password in its URL.
func outgoing(ctx context.Context, req *http.Request, t target, body *watchedBody) *http.Request {
	u := *req.URL
	u.Host = t.host
	if t.ip.Is6() {
		u.Host = "[" + t.host + "]"
	}
	if t.port != 80 {
		u.Host = t.addr()
	}
	u.User, u.Fragment, u.RawFragment = nil, "", ""
	h := req.Header.Clone()
	removeHopByHop(h)
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // send none rather than Go's
	}
	out := &http.Request{Method: req.Method, URL: &u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Host: u.Host, ContentLength: req.ContentLength}
	if req.ContentLength != 0 {
		out.Body = body
	}
	return out.WithContext(ctx)
}

// removeHopByHop deletes the headers that concern one connection only
// (RFC 9110 7.6.1), those the Connection header names, and the proxy's
// own credentials, which are not the destination's business.
func removeHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range [...]string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
		delete(h, k)
	}
}

// writeResponse streams the destination's response to the client, framed
// for the client's connection. It reports whether the connection may
// carry another request.
func (p *Proxy) writeResponse(c net.Conn, req *http.Request, resp *http.Response, w *watch) bool {
	h := resp.Header
	removeHopByHop(h)
	keep := !req.Close && req.ProtoAtLeast(1, 1)
	chunked := false
	bodyless := req.Method == http.MethodHead || resp.StatusCode < 200 ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified
	if !bodyless {
		h.Del("Content-Length")
		switch {
		case resp.ContentLength >= 0:
			h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
		case req.ProtoAtLeast(1, 1):
			chunked = true
			h.Set("Transfer-Encoding", "chunked")
		default:
			keep = false // an HTTP/1.0 client reads the body to the end of the connection
		}
	}
	if !keep {
		h.Set("Connection", "close")
	}
	reason := strings.TrimSpace(strings.TrimPrefix(resp.Status, strconv.Itoa(resp.StatusCode)))
	if reason == "" {
		reason = http.StatusText(resp.StatusCode)
	}
	var head bytes.Buffer
	fmt.Fprintf(&head, "HTTP/1.1 %03d %s\r\n", resp.StatusCode, reason)
	h.Write(&head)
	head.WriteString("\r\n")
	c.SetWriteDeadline(time.Now().Add(p.idleTimeout))
	if _, err := c.Write(head.Bytes()); err != nil {
		return false
	}
	if bodyless {
		return keep
	}
	n, err := p.copyBody(c, resp.Body, chunked, w)
	if err != nil || resp.ContentLength >= 0 && n != resp.ContentLength {
		return false
	}
	c.SetWriteDeadline(time.Time{})
	return keep
}

// chunkRoom is the room copyBody keeps before a chunk for its size line
// ("8000\r\n" at most for a 32 KiB buffer).
const chunkRoom = 8

// copyBody copies a response body to the client as it arrives, each read
// in one write (one chunk, when chunked), bounding every write and every
// wait for the destination by IdleTimeout.
func (p *Proxy) copyBody(c net.Conn, body io.Reader, chunked bool, w *watch) (int64, error) {
	bp := p.getBuf()
	defer p.putBuf(bp)
	buf := *bp
	space := buf
	if chunked {
		space = buf[chunkRoom : len(buf)-2]
	}
	var total int64
	var size [chunkRoom]byte
	for {
		n, err := body.Read(space)
		if n > 0 {
			w.touch()
			out := space[:n]
			if chunked {
				line := append(strconv.AppendInt(size[:0], int64(n), 16), '\r', '\n')
				start := chunkRoom - len(line)
				copy(buf[start:], line)
				buf[chunkRoom+n], buf[chunkRoom+n+1] = '\r', '\n'
				out = buf[start : chunkRoom+n+2]
			}
			c.SetWriteDeadline(time.Now().Add(p.idleTimeout))
			if _, werr := c.Write(out); werr != nil {
				return total, werr
			}
			total += int64(n)
		}
		switch {
		case errors.Is(err, io.EOF):
			if chunked {
				if _, werr := io.WriteString(c, "0\r\n\r\n"); werr != nil {
					return total, werr
				}
			}
			return total, nil
		case err != nil:
			return total, err
		}
	}
}

// watch cancels a forwarded request when nothing moved either way for
// IdleTimeout: no byte of the request's body sent, no byte of the answer
// received.
type watch struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	idle   time.Duration
}

func (p *Proxy) newWatch() *watch {
	ctx, cancel := context.WithCancelCause(p.ctx)
	w := &watch{ctx: ctx, cancel: cancel, idle: p.idleTimeout}
	w.timer = time.AfterFunc(p.idleTimeout, func() { cancel(errIdle) })
	return w
}

// touch notes progress; the transport's goroutine calls it too.
func (w *watch) touch() { w.timer.Reset(w.idle) }

func (w *watch) stop() {
	w.timer.Stop()
	w.cancel(nil)
}

// watchedBody is a request body as the transport reads it: each read is
// progress, and the end is noted. Close does not close the client's
// body, which would read it to its end from the connection's reader.
type watchedBody struct {
	r   io.Reader
	w   *watch
	eof atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		b.w.touch()
	}
	if errors.Is(err, io.EOF) {
		b.eof.Store(true)
	}
	return n, err
}

func (b *watchedBody) Close() error { return nil }

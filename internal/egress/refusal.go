package egress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/runes"
)

// Refusal is one destination or request the proxy refused, as reported to
// Options.OnRefusal for the tool result and the audit record.
type Refusal struct {
	// Method is the request's method (CONNECT, GET, ...); "" when no
	// request could be read.
	Method string
	// Host is the destination as judged (lower case, IDNA ASCII), or as
	// the command wrote it when it is not a valid host; "" when unknown.
	Host string
	// Port is the destination's port; 0 when unknown.
	Port int
	// Rule is the Decision text of the rule that judged the destination
	// (`allow "*.npmjs.org"` when the rules allowed it and something else
	// refused it), or "" when the refusal came before any rule.
	Rule string
	// Reason says why, in words: the Rule itself for a rule's refusal.
	Reason string
	// Status is the HTTP status the command was answered (403, 400, 431,
	// 503), or 0 when the tunnel was already open and was closed instead
	// (a ClientHello that names another host).
	Status int
}

// String is the text the command sees: "refused: host:port (reason)".
func (r Refusal) String() string {
	return "refused: " + r.destination() + " (" + r.Reason + ")"
}

func (r Refusal) destination() string {
	switch {
	case r.Host == "":
		return "(no destination)"
	case r.Port == 0:
		return r.Host
	}
	return net.JoinHostPort(r.Host, strconv.Itoa(r.Port))
}

// refuse tells the client why (unless its tunnel is open already, Status
// 0), logs it and reports it.
func (p *Proxy) refuse(c net.Conn, r Refusal) {
	r.Host = runes.Shorten(r.Host, runes.Echo)
	p.log.Info().Str("method", r.Method).Str("host", r.Host).Int("port", r.Port).
		Str("rule", r.Rule).Str("reason", r.Reason).Msg("egress refused")
	if p.onRefusal != nil {
		p.onRefusal(r)
	}
	if r.Status != 0 {
		p.answer(c, r.Status, r.String(), true)
	}
}

// answer writes a whole response whose reason phrase, body and, for a
// refusal, X-Toolsvc-Refused header carry msg, then ends the connection.
// The reason phrase carries it too because it is what most clients quote
// when a CONNECT fails (pip: "Tunnel connection failed: 403 refused: ...").
func (p *Proxy) answer(c net.Conn, status int, msg string, refused bool) {
	line := headerSafe(msg)
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %03d %s\r\n", status, line)
	if refused {
		b.WriteString("X-Toolsvc-Refused: " + line + "\r\n")
	}
	body := msg + "\n"
	fmt.Fprintf(&b, "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	c.SetWriteDeadline(time.Now().Add(p.headerTimeout))
	if _, err := c.Write(b.Bytes()); err == nil {
		lingerClose(c)
	}
}

// lingerClose ends the client's side after a final answer: it closes the
// writing half and reads what the client still sends for a moment, so
// that closing with unread bytes (a request body the proxy did not
// forward) does not reset the connection under the answer before the
// client has read it.
func lingerClose(c net.Conn) {
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	io.Copy(io.Discard, io.LimitReader(c, 1<<20))
}

// headerSafe makes msg one line fit for a status line or header value:
// control characters become spaces.
func headerSafe(msg string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, msg)
}

// errHeadTooLarge: the request head did not fit in MaxHeaderBytes.
var errHeadTooLarge = errors.New("request head too large")

// readRequest reads one request head within timeout. hosts are the values
// of its Host header lines, which http.ReadRequest drops for a request in
// absolute form: the proxy checks them against the URL's host. The reader
// starts small and is replaced by one of MaxHeaderBytes (reading through
// it, so that nothing buffered is lost) only for a head that needs it;
// the connection reads through the reader returned from then on.
func (p *Proxy) readRequest(c net.Conn, br *bufio.Reader, timeout time.Duration) (*http.Request, []string, *bufio.Reader, error) {
	c.SetReadDeadline(time.Now().Add(timeout))
	head, err := peekHead(br)
	if errors.Is(err, errHeadTooLarge) && br.Size() < p.maxHeader {
		br = bufio.NewReaderSize(br, p.maxHeader)
		head, err = peekHead(br)
	}
	if err != nil {
		return nil, nil, br, err
	}
	hosts := hostValues(head)
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, nil, br, err
	}
	c.SetReadDeadline(time.Time{})
	return req, hosts, br, nil
}

// peekHead waits until br holds a whole request head (up to the blank line
// that ends it) and returns it without consuming it. A head that does not
// fit br's buffer is errHeadTooLarge.
func peekHead(br *bufio.Reader) ([]byte, error) {
	scanned := 0
	for {
		b, _ := br.Peek(br.Buffered())
		if end := headEnd(b, scanned); end >= 0 {
			return b[:end], nil
		}
		if len(b) >= br.Size() {
			return nil, errHeadTooLarge
		}
		scanned = max(0, len(b)-2)
		if _, err := br.Peek(len(b) + 1); err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return nil, errHeadTooLarge
			}
			return nil, err
		}
	}
}

// headEnd returns the end of the blank line that ends a head ("\n\n" or
// "\n\r\n"), looking from index from on, or -1.
func headEnd(b []byte, from int) int {
	for i := from; i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		if i+1 < len(b) && b[i+1] == '\n' {
			return i + 2
		}
		if i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n' {
			return i + 3
		}
	}
	return -1
}

// hostValues returns the values of the Host header lines of a head.
func hostValues(head []byte) []string {
	var hosts []string
	_, rest, _ := bytes.Cut(head, []byte("\n")) // the request line
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		if len(line) >= 5 && strings.EqualFold(string(line[:5]), "host:") {
			hosts = append(hosts, string(bytes.TrimSpace(line[5:])))
		}
	}
	return hosts
}

// answerUnreadable answers a request the proxy could not read, or ends the
// connection quietly when the client went away or sent nothing.
func (p *Proxy) answerUnreadable(c net.Conn, err error) {
	switch {
	case errors.Is(err, errHeadTooLarge):
		p.refuse(c, Refusal{Status: http.StatusRequestHeaderFieldsTooLarge,
			Reason: fmt.Sprintf("the request head is over %d bytes", p.maxHeader)})
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, os.ErrDeadlineExceeded):
		// Gone, idle, or too slow to send a head: nothing to say.
	default:
		var ne *net.OpError
		if errors.As(err, &ne) {
			return
		}
		p.refuse(c, Refusal{Status: http.StatusBadRequest,
			Reason: "not an HTTP request: " + runes.Shorten(err.Error(), runes.Echo)})
	}
}

// refuseBusy answers a connection over MaxConns. It reads the request
// head first (briefly), to name the destination and so that closing does
// not reset the connection under the answer.
func (p *Proxy) refuseBusy(c net.Conn) {
	r := Refusal{Status: http.StatusServiceUnavailable,
		Reason: fmt.Sprintf("too many connections through the proxy at once (the limit is %d); retry when others have finished", p.maxConns)}
	c.SetReadDeadline(time.Now().Add(min(p.headerTimeout, time.Second)))
	if req, err := http.ReadRequest(bufio.NewReaderSize(c, 4096)); err == nil {
		r.Method = req.Method
		host, port, err := net.SplitHostPort(req.Host)
		if err != nil {
			host = req.Host
		}
		r.Host = host
		r.Port, _ = parsePort(port)
	}
	p.refuse(c, r)
}

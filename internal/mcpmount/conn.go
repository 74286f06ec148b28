package mcpmount

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// conn is one connection to the server: its session and, for a stdio
// server, the process. done is closed when the connection has ended and
// the process is gone.
type conn struct {
	s     *Server
	cs    *mcp.ClientSession
	child *child      // nil for Streamable HTTP
	limit *frameLimit // the bound on one message (stdio)
	// httpOver is set when a response body passed the bound (HTTP).
	httpOver atomic.Bool
	done     chan struct{}
	once     sync.Once
	mu       sync.Mutex
	err      error // why it ended
	// timeouts counts the calls in a row that got no answer within their
	// timeout; any answer resets it. pinging is set while the ping that
	// follows such a call waits (see Server.timedOut).
	timeouts atomic.Int32
	pinging  atomic.Bool
}

func newConn(s *Server, ch *child, limit *frameLimit) *conn {
	return &conn{s: s, child: ch, limit: limit, done: make(chan struct{})}
}

// watch waits for the session to end, however it ends (the process
// exited, a read failed, Close), and then makes sure the process is gone.
func (c *conn) watch() {
	err := c.cs.Wait()
	c.close()
	c.mu.Lock()
	if c.err == nil {
		why := c.diagnose()
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, errTooLarge) && !errors.Is(err, mcp.ErrConnectionClosed) {
			why = strings.TrimPrefix(why+"; the connection failed: "+c.s.redact(err.Error()), "; ")
		}
		if why == "" {
			why = "the connection ended"
		}
		c.err = fmt.Errorf("MCP server %s: %s", c.s.name, why)
	}
	c.mu.Unlock()
	close(c.done)
}

// why returns why the connection ended (after done).
func (c *conn) why() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		return fmt.Errorf("MCP server %s: connection ended", c.s.name)
	}
	return c.err
}

// ended reports whether the connection has ended.
func (c *conn) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// abort kills a stdio server's process and everything it started at
// once, then closes the connection: for a process that never finished
// the handshake, or that stopped answering, which has nothing to save
// and might not read its stdin's end. Killing it first also ends the
// session's read of its stdout, which retires the calls still waiting
// for an answer, so that closing the session does not wait for them.
func (c *conn) abort() {
	if c.child != nil {
		c.child.killed.Store(true)
		c.child.kill()
	}
	c.close()
}

// close ends the session and stops the process. It may be called more
// than once, from any goroutine.
func (c *conn) close() {
	c.once.Do(func() {
		if c.cs != nil {
			_ = c.cs.Close()
		}
		if c.child != nil {
			c.child.stop()
		}
	})
}

// diagnose says what went wrong with the connection, as far as is known:
// an oversized message, garbage on stdout, the process's exit and the end
// of its stderr. "" when nothing is known.
func (c *conn) diagnose() string {
	var parts []string
	if c.httpOver.Load() || c.limit != nil && c.limit.over.Load() {
		parts = append(parts, fmt.Sprintf("the server sent a message larger than %d bytes, the bound on one message; the connection was closed%s", c.s.d.MaxMessage, c.restartNote()))
	} else if c.child != nil {
		if g := c.limit.garbage(); g != "" {
			parts = append(parts, fmt.Sprintf("the server wrote %q to stdout, which is not a JSON-RPC message (an MCP stdio server must write only protocol messages there; logs belong on stderr)", g))
		}
	}
	if c.child != nil {
		if exit := c.child.exitText(); exit != "" {
			parts = append(parts, exit)
		}
		if tail := c.stderrTail(); tail != "" {
			parts = append(parts, "its stderr ended with:\n"+c.s.redact(tail))
		}
	}
	return strings.Join(parts, "; ")
}

// stderrTail returns the end of a stdio server's stderr, "" for HTTP.
func (c *conn) stderrTail() string {
	if c.child == nil {
		return ""
	}
	return c.child.stderr.tailText()
}

func (c *conn) restartNote() string {
	if c.child != nil {
		return " and the server stopped; it is being restarted"
	}
	return ""
}

// frameLimit bounds the bytes of one newline-delimited message (stdio) or
// of one response body (HTTP), so that a 100 MB result is refused after
// MaxMessage bytes instead of being held in memory; the go-sdk's own bound
// is set above it. It also keeps the first bytes ever read, to name
// garbage on stdout.
type frameLimit struct {
	r     io.ReadCloser
	limit int
	lines bool // count from the last newline (stdio), else from the start
	n     int  // bytes of the current message
	// first holds the first bytes read; mu guards it, since a failed
	// start reads it (garbage) while the SDK's reader may still read.
	mu     sync.Mutex
	first  []byte
	over   atomic.Bool
	onOver func() // called once when the bound is passed
}

const firstBytes = 120

var errTooLarge = errors.New("message too large")

func (f *frameLimit) Read(p []byte) (int, error) {
	if f.over.Load() {
		return 0, errTooLarge
	}
	n, err := f.r.Read(p)
	f.mu.Lock()
	if len(f.first) < firstBytes {
		f.first = append(f.first, p[:min(n, firstBytes-len(f.first))]...)
	}
	f.mu.Unlock()
	if i := bytes.LastIndexByte(p[:n], '\n'); f.lines && i >= 0 {
		f.n = n - i - 1
	} else {
		f.n += n
	}
	if f.n > f.limit {
		f.over.Store(true)
		if f.onOver != nil {
			f.onOver()
		}
		return 0, errTooLarge
	}
	return n, err
}

func (f *frameLimit) Close() error { return f.r.Close() }

// garbage returns the start of stdout when it is not JSON, else "".
func (f *frameLimit) garbage() string {
	if f == nil {
		return ""
	}
	f.mu.Lock()
	b := bytes.TrimLeft(bytes.Clone(f.first), " \t\r\n")
	f.mu.Unlock()
	if len(b) == 0 || b[0] == '{' || b[0] == '[' {
		return ""
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// stderrLog sends a server's stderr to the log, line by line, redacted,
// each line cut at maxLine and at most linesPerMinute lines a minute (the
// rest counted), and keeps its last tailBytes for error messages.
type stderrLog struct {
	s       *Server
	mu      sync.Mutex
	partial []byte
	tail    []byte
	window  time.Time
	lines   int
	dropped int
}

const (
	maxLine        = 1000
	linesPerMinute = 300
	tailBytes      = 2000
)

func (l *stderrLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tail = append(l.tail, p...)
	if len(l.tail) > 2*tailBytes {
		l.tail = append([]byte(nil), l.tail[len(l.tail)-tailBytes:]...)
	}
	data := p
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if len(l.partial) < maxLine {
				l.partial = append(l.partial, data[:min(len(data), maxLine-len(l.partial))]...)
			}
			break
		}
		if len(l.partial) < maxLine {
			l.partial = append(l.partial, data[:min(i, maxLine-len(l.partial))]...)
		}
		l.emit()
		data = data[i+1:]
	}
	return len(p), nil
}

func (l *stderrLog) emit() {
	line := strings.TrimRight(strings.ToValidUTF8(string(l.partial), "\uFFFD"), "\r")
	l.partial = l.partial[:0]
	if strings.TrimSpace(line) == "" {
		return
	}
	now := time.Now()
	if now.Sub(l.window) >= time.Minute {
		if l.dropped > 0 {
			l.s.log.Warn().Int("lines", l.dropped).Msg("mcp server stderr: lines not logged (more than the bound a minute)")
		}
		l.window, l.lines, l.dropped = now, 0, 0
	}
	if l.lines >= linesPerMinute {
		l.dropped++
		return
	}
	l.lines++
	l.s.log.Info().Str("stderr", l.s.redact(line)).Msg("mcp server stderr")
}

// tailText returns the last lines of stderr, at most tailBytes.
func (l *stderrLog) tailText() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.tail
	if len(t) > tailBytes {
		t = t[len(t)-tailBytes:]
		if i := bytes.IndexByte(t, '\n'); i >= 0 && i < len(t)-1 {
			t = t[i+1:]
		}
	}
	return strings.TrimSpace(strings.ToValidUTF8(string(t), "\uFFFD"))
}

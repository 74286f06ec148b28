// Package logbuf writes the service's log lines in batches.
//
// The access log alone is one line per request, and a write(2) per line
// costs about a twentieth of a small call's processor time; more where the
// log goes to a pipe (a container engine's), whose reader is woken for
// each line. So lines at info level and below wait in a buffer, until it
// holds MaxBuffered bytes or its oldest line has waited the flush
// interval. Any other line (a warning, an error) is written at once,
// together with the lines before it: what needs attention is never late,
// and the order of the lines is kept. Close writes what is left; a crash
// that kills the process loses at most one interval of info lines, which
// the audit log, written on its own, still has a record of.
package logbuf

import (
	"bytes"
	"io"
	"sync"
	"time"
)

// MaxBuffered is how many bytes of lines wait before they are written
// without waiting for the interval.
const MaxBuffered = 32 << 10

// Writer passes whole writes (log lines, audit records) to an io.Writer
// one at a time, so that lines of two writers never mix, and in batches.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	every   time.Duration
	buf     []byte
	timer   *time.Timer // flushes the buffer an interval after its first line
	pending bool        // the timer is set
	closed  bool        // lines are written at once
	err     error       // a batch the timer could not write, told at the next Write
}

// New returns a Writer to w that keeps info lines for at most every; with
// every zero or less, each line is written at once.
func New(w io.Writer, every time.Duration) *Writer {
	b := &Writer{w: w, every: every}
	if every > 0 {
		b.timer = time.AfterFunc(time.Hour, b.flushTimer)
		b.timer.Stop()
	}
	return b
}

// Write takes one whole line. A line that waits is reported written; an
// earlier batch that failed is reported by the next Write.
func (b *Writer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.err; err != nil {
		b.err = nil
		return 0, err
	}
	if b.every <= 0 || b.closed || urgent(p) || len(p) >= MaxBuffered {
		if len(b.buf) == 0 {
			return b.w.Write(p)
		}
		b.buf = append(b.buf, p...)
		return len(p), b.flush()
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) >= MaxBuffered {
		return len(p), b.flush()
	}
	if !b.pending {
		b.pending = true
		b.timer.Reset(b.every)
	}
	return len(p), nil
}

// Flush writes the lines waiting.
func (b *Writer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flush()
}

// Close writes the lines waiting; later lines are written at once.
func (b *Writer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return b.flush()
}

func (b *Writer) flushTimer() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending = false
	if err := b.flush(); err != nil {
		b.err = err
	}
}

// flush writes the buffer, with b.mu held, and stops the timer.
func (b *Writer) flush() error {
	if b.pending {
		b.timer.Stop()
		b.pending = false
	}
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.w.Write(b.buf)
	if cap(b.buf) > 2*MaxBuffered {
		b.buf = nil // a long line grew it: do not keep the memory
	} else {
		b.buf = b.buf[:0]
	}
	return err
}

// urgent reports whether a line is above info level. zerolog writes the
// level as the line's first field; a line without one (an audit record)
// can wait.
func urgent(p []byte) bool {
	const key = `{"level":"`
	rest, ok := bytes.CutPrefix(p, []byte(key))
	if !ok {
		return false
	}
	for _, calm := range []string{`info"`, `debug"`, `trace"`} {
		if bytes.HasPrefix(rest, []byte(calm)) {
			return false
		}
	}
	return true
}

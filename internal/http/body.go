package http

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// drainMax bounds what is read and thrown away after a 413, so that a client
// which sends its whole body before reading the answer (Python's
// http.client, most simple clients) gets the 413 instead of a broken pipe,
// while a client announcing gigabytes cannot keep the server reading.
const drainMax = 32 << 20

// errBodyBudget ends a body read when the bodies in memory would exceed
// the budget.
var errBodyBudget = errors.New("request bodies in memory exceed the budget")

// budgetReader counts what it reads against the server's body budget,
// beyond the free bytes counted already (a buffer made at the announced
// length). n is what it has counted in all; release gives it back.
type budgetReader struct {
	r        io.Reader
	s        *server
	n        int64
	free     int64
	released atomic.Bool
}

// release gives the body's bytes back to the budget, once however often
// it is called.
func (b *budgetReader) release() {
	if !b.released.Swap(true) {
		b.s.bodies.Add(-b.n)
	}
}

// noRelease is the release of a request that counted nothing.
func noRelease() {}

func (b *budgetReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if c := int64(n); c > 0 {
		used := min(c, b.free)
		b.free -= used
		if c -= used; c > 0 {
			b.n += c
			if b.s.bodies.Add(c) > b.s.bodyBudget {
				return n, errBodyBudget
			}
		}
	}
	return n, err
}

// readBody reads a call's body under the body deadline and the size limit.
// When ok is false it has answered the request: 413 (too large, known from
// Content-Length before reading anything, or found while reading), 408 (the
// body did not arrive within the deadline), 503 (bodies in memory over the
// budget) or 400. No concurrency slot is held while a body arrives, so slow
// uploads cannot starve the calls that are ready to run; the body budget
// (MaxConcurrent times MaxBodyBytes) bounds the memory bodies take instead.
// release gives the body's bytes back to the budget once the call is over.
func (s *server) readBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), ok bool) {
	rc := http.NewResponseController(w)
	if r.ContentLength > s.opts.MaxBodyBytes {
		s.refuseTooLarge(w, r, rc, r.Body)
		return nil, noRelease, false
	}
	if r.ContentLength == 0 {
		return nil, noRelease, true
	}
	br := &budgetReader{r: r.Body, s: s}
	if r.ContentLength > 0 {
		// The buffer is made at the announced length before the bytes
		// come, so it counts against the budget at once: clients that
		// announce large bodies and send nothing cannot make the server
		// hold more than the budget.
		br.n, br.free = r.ContentLength+1, r.ContentLength+1
		if s.bodies.Add(br.n) > s.bodyBudget {
			s.bodies.Add(-br.n)
			w.Header().Set("Connection", "close")
			writeError(w, kindOverloaded, "too many request bodies are arriving at once; retry shortly")
			return nil, noRelease, false
		}
	}
	release = br.release
	// The deadline is on the connection: it ends a read that is waiting for
	// bytes, which a timer around io.ReadAll could not.
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	body, err := readAll(http.MaxBytesReader(w, io.NopCloser(br), s.opts.MaxBodyBytes), r.ContentLength)
	if err == nil {
		// Lift the deadline: the server watches the idle connection for a
		// client that goes away while the call runs, and that watch must
		// not end at the body deadline.
		_ = rc.SetReadDeadline(time.Time{})
		return body, release, true
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		s.refuseTooLarge(w, r, rc, r.Body)
	case errors.Is(err, errBodyBudget):
		w.Header().Set("Connection", "close")
		writeError(w, kindOverloaded, "too many request bodies are arriving at once; retry shortly")
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		writeError(w, kindBodyTimeout, fmt.Sprintf("the request body did not arrive within %s; send the whole body at once", s.opts.BodyTimeout))
	default:
		w.Header().Set("Connection", "close")
		writeError(w, kindBadRequest, "could not read the request body")
	}
	return nil, release, false
}

// refuseTooLarge answers 413 at once and then reads and discards a bounded
// part of the rest of the body, for a bounded time, before the connection
// is closed. Closing a socket with unread data makes the kernel reset the
// connection, and a client still sending would see a broken pipe instead
// of the answer. A client that asked for "100 Continue" has not sent its
// body and is not waited for.
func (s *server) refuseTooLarge(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, body io.Reader) {
	w.Header().Set("Connection", "close")
	// Reading the body after the answer needs full duplex: by default the
	// server stops reading the request once the response has started.
	_ = rc.EnableFullDuplex()
	writeError(w, kindBodyTooLarge, fmt.Sprintf("the request body is larger than %d bytes. For write_file, send large content in several calls with mode=append.", s.opts.MaxBodyBytes))
	_ = rc.Flush()
	if strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		return
	}
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	_, _ = io.CopyN(io.Discard, body, drainMax)
}

// readAll reads r to its end into a buffer of the announced length (one
// byte more, to see the end), where io.ReadAll would grow its buffer by
// copies that hold a large body about twice over. Without a length, or
// when more comes than announced, it grows as io.ReadAll does.
func readAll(r io.Reader, length int64) ([]byte, error) {
	if length <= 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, length+1)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

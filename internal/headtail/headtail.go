// Package headtail keeps the beginning and the end of a stream of bytes in
// fixed memory, counting what it drops in between.
package headtail

import "sync"

// Buffer is an io.Writer that keeps the first headCap and the last tailCap
// bytes written to it. Memory stays flat whatever is written. It is safe
// for concurrent use.
//
// Memory is taken as the stream grows: a command that prints a line costs
// that line, not the capacity.
type Buffer struct {
	mu      sync.Mutex
	headCap int
	tailCap int
	head    []byte // up to headCap bytes
	tail    []byte // ring of tailCap bytes, made when the head is full
	pos     int    // next write position in tail
	full    bool   // tail has wrapped
	total   int64
}

// New returns a Buffer keeping headCap bytes at the start and tailCap at
// the end.
func New(headCap, tailCap int) *Buffer {
	return &Buffer{headCap: headCap, tailCap: tailCap}
}

// Write keeps what fits and never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	if room := b.headCap - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || b.tailCap == 0 {
		return n, nil
	}
	if b.tail == nil {
		b.tail = make([]byte, b.tailCap)
	}
	size := len(b.tail)
	if len(p) >= size {
		copy(b.tail, p[len(p)-size:])
		b.pos, b.full = 0, true
		return n, nil
	}
	k := copy(b.tail[b.pos:], p)
	if k < len(p) {
		copy(b.tail, p[k:])
		b.full = true
	}
	b.pos = (b.pos + len(p)) % size
	if b.pos == 0 {
		b.full = true
	}
	return n, nil
}

// Total returns how many bytes were written in all.
func (b *Buffer) Total() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Snapshot returns copies of the kept head and tail, and how many bytes
// between them were dropped. head followed by tail is the whole stream
// when dropped is zero.
func (b *Buffer) Snapshot() (head, tail []byte, dropped int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	head = append([]byte(nil), b.head...)
	if b.full {
		tail = append(append(tail, b.tail[b.pos:]...), b.tail[:b.pos]...)
	} else {
		tail = append(tail, b.tail[:b.pos]...)
	}
	return head, tail, b.total - int64(len(head)) - int64(len(tail))
}

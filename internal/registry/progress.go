package registry

import "sync"

// progressFilter passes a call's progress events on, redacted exactly like
// the result. A secret can arrive cut in two across events (a command's
// output is sent in pieces as it comes), so the end of each event that
// could be the beginning of a secret is held back and sent with the next
// event of the same name, or when the call ends.
type progressFilter struct {
	next   func(event, data string)
	redact func(string) string
	hold   func(string) int

	mu     sync.Mutex
	carry  map[string]string
	order  []string // event names in the order first seen, for a stable flush
	closed bool
}

func newProgressFilter(next func(event, data string), redact func(string) string, hold func(string) int) *progressFilter {
	if hold == nil {
		hold = func(string) int { return 0 }
	}
	return &progressFilter{next: next, redact: redact, hold: hold, carry: make(map[string]string)}
}

func (p *progressFilter) send(event, data string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	prev, seen := p.carry[event]
	if !seen {
		p.order = append(p.order, event)
	}
	text := prev + data
	n := min(max(p.hold(text), 0), len(text))
	p.carry[event] = text[len(text)-n:]
	if out := text[:len(text)-n]; out != "" {
		p.next(event, p.redact(out))
	}
}

// close sends what was held back and drops any later event: the call is
// over, and its result follows.
func (p *progressFilter) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	for _, ev := range p.order {
		if rest := p.carry[ev]; rest != "" {
			p.next(ev, p.redact(rest))
		}
	}
}

// Package redact removes known secret values from text before it leaves the
// service: tool results, progress streams, audit records and log lines. It
// also says which argument and variable names look like they hold secrets.
package redact

import (
	"encoding/json"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Mask replaces every secret found.
const Mask = "[REDACTED]"

// minLen is the shortest value treated as a secret; shorter ones would
// blank ordinary words.
const minLen = 8

// Redactor replaces secret values with Mask. The zero value and nil redact
// nothing. It is safe for concurrent use, Add included.
type Redactor struct {
	mu  sync.Mutex // serialises Add
	raw []string   // every secret given, as given
	st  atomic.Pointer[state]
}

// state is the secrets in force, replaced as a whole by Add.
type state struct {
	r       *strings.Replacer
	secrets []string // longest first, with their JSON-escaped forms
}

// New returns a Redactor for the given secrets. Values shorter than eight
// characters are ignored. A secret is also found in its JSON-escaped form
// (a key holding a quote or a backslash, written inside a JSON string), so
// raw JSON arguments and JSON log lines are covered too.
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	r.Add(secrets...)
	return r
}

// Add makes more values secret from now on, for secrets the service
// learns after start-up (header values of tools read from a file). Text
// already redacted is not revisited.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.raw = append(r.raw, secrets...)
	seen := map[string]bool{}
	var list []string
	add := func(s string) {
		if len(s) >= minLen && !seen[s] {
			seen[s] = true
			list = append(list, s)
		}
	}
	for _, s := range r.raw {
		if len(s) >= minLen {
			add(s)
			add(jsonEscaped(s)) // escaping only lengthens: a short secret stays out
		}
	}
	if len(list) == 0 {
		r.st.Store(nil)
		return
	}
	// Longest first, so a secret that contains another is replaced whole.
	sort.SliceStable(list, func(i, j int) bool { return len(list[i]) > len(list[j]) })
	pairs := make([]string, 0, 2*len(list))
	for _, s := range list {
		pairs = append(pairs, s, Mask)
	}
	r.st.Store(&state{r: strings.NewReplacer(pairs...), secrets: list})
}

// current returns the secrets in force, or nil when there are none.
func (r *Redactor) current() *state {
	if r == nil {
		return nil
	}
	return r.st.Load()
}

// jsonEscaped returns s as it appears inside a JSON string written by
// encoding/json (which also escapes <, > and &).
func jsonEscaped(s string) string {
	b, err := json.Marshal(s)
	if err != nil || len(b) < 2 {
		return s
	}
	return string(b[1 : len(b)-1])
}

// String returns s with every secret replaced.
func (r *Redactor) String(s string) string {
	st := r.current()
	if st == nil {
		return s
	}
	// Most text holds no secret: it is given back as it is, without the
	// copy (twice its size) the replacer makes of whatever it is given.
	for _, secret := range st.secrets {
		if strings.Contains(s, secret) {
			return st.r.Replace(s)
		}
	}
	return s
}

// Progress wraps a listener of progress events (event name, data) so that
// no secret reaches it, not even one split across two events of the same
// name: the end of an event that could be the start of a secret is held
// back until the next event of that name, or until flush. Flush must be
// called once the events end; it sends what was held back, redacted.
func (r *Redactor) Progress(fn func(event, data string)) (send func(event, data string), flush func()) {
	if fn == nil {
		return nil, func() {}
	}
	st := r.current()
	if st == nil {
		return fn, func() {}
	}
	var mu sync.Mutex
	held := map[string]string{}
	var order []string // event names in the order their tails were first held
	send = func(event, data string) {
		mu.Lock()
		text := held[event] + data
		out, tail := st.scan(text)
		if tail != "" {
			if !slices.Contains(order, event) {
				order = append(order, event)
			}
			held[event] = tail
		} else {
			delete(held, event)
		}
		mu.Unlock()
		if out != "" {
			fn(event, out)
		}
	}
	flush = func() {
		mu.Lock()
		var rest [][2]string
		for _, ev := range order {
			if t, ok := held[ev]; ok {
				rest = append(rest, [2]string{ev, st.r.Replace(t)})
				delete(held, ev)
			}
		}
		held, order = map[string]string{}, nil
		mu.Unlock()
		for _, e := range rest {
			fn(e[0], e[1])
		}
	}
	return send, flush
}

// scan redacts text up to the first position from which the rest could be
// the beginning of a secret, and returns that rest unredacted. Secrets are
// tried longest first, as String does: where a longer secret may still
// match once more text arrives, nothing shorter is replaced yet.
func (r *state) scan(text string) (out, tail string) {
	var b strings.Builder
	i := 0
next:
	for i < len(text) {
		rest := text[i:]
		for _, s := range r.secrets {
			switch {
			case strings.HasPrefix(rest, s):
				b.WriteString(Mask)
				i += len(s)
				continue next
			case len(rest) < len(s) && strings.HasPrefix(s, rest):
				return b.String(), rest
			}
		}
		b.WriteByte(text[i])
		i++
	}
	return b.String(), ""
}

// Writer returns a writer that redacts what it writes to w. It is meant for
// a logger that writes one whole line per Write, as zerolog does; a secret
// split across two writes is not found. Secrets added later are redacted
// from then on.
func (r *Redactor) Writer(w io.Writer) io.Writer {
	if r == nil {
		return w
	}
	return &writer{r: r, w: w}
}

type writer struct {
	r *Redactor
	w io.Writer
}

// Write reports len(p) on success, whatever the length of the redacted text,
// since callers compare the count with what they handed over.
func (w *writer) Write(p []byte) (int, error) {
	// The line is searched where it is, not copied: nothing here keeps
	// it past the call, and String gives back the very string it was
	// given when there is no secret in it.
	view := unsafe.String(unsafe.SliceData(p), len(p))
	red := w.r.String(view)
	if len(red) == len(view) && unsafe.StringData(red) == unsafe.StringData(view) {
		return w.w.Write(p)
	}
	if _, err := io.WriteString(w.w, red); err != nil {
		return 0, err
	}
	return len(p), nil
}

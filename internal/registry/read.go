package registry

import (
	"encoding/json"
	"github.com/countbot/toolsvc/internal/jsonx"
	"unicode/utf8"

	"github.com/countbot/toolsvc/internal/redact"
)

// reading is a call's arguments and what reading them found. A call's
// arguments are read once, here, for everything the registry and the
// audit log need of them: whether they are JSON, their value for the
// checks, their compact form and whether they may name a secret for the
// audit record. Only arguments the one pass does not take (not JSON, not
// UTF-8, nested deeper than maxReadDepth, or big ones checked on a cut
// copy) are left to the checks' own reading (checkValidity).
type reading struct {
	raw []byte
	// valid: raw is JSON.
	valid bool
	// whole: raw was read whole in one pass: valid JSON of valid UTF-8,
	// with value, compact and secretNames set.
	whole bool
	// value is raw decoded as a json.Decoder with UseNumber decodes it.
	value any
	// compact is raw without white space between its tokens (raw itself
	// when it has none), the form json.Compact gives.
	compact []byte
	// secretNames is redact.MentionsSecretName(raw): whether a name in
	// raw may look like a secret's.
	secretNames bool
}

// read reads a call's arguments for the tool of e (nil: none). Arguments
// the checks will look at through a cut copy (see checkValue) are not
// decoded here, so that a 50 MB write_file is not.
func (r *Registry) read(e *entry, raw []byte) reading {
	r.countRead()
	if e == nil || e.shortenAt == 0 || len(raw) <= bigArguments {
		if rd, ok := readWhole(raw); ok {
			return rd
		}
		r.countRead()
	}
	return reading{raw: raw, valid: json.Valid(raw)}
}

// countRead tells the test hooks of one pass over a call's arguments.
func (r *Registry) countRead() {
	if r.hooks != nil && r.hooks.read != nil {
		r.hooks.read()
	}
}

// readWhole reads raw in one pass: it checks the JSON and the UTF-8,
// decodes the value, writes the compact form when raw has white space
// between tokens, and looks for secret-looking names in each string it
// passes. False: raw is not JSON, not UTF-8, or nested too deep for it.
func readWhole(raw []byte) (reading, bool) {
	a := argReader{b: raw}
	v, end, ok := a.value(a.space(0), 0)
	if !ok || a.space(end) != len(raw) {
		return reading{}, false
	}
	compact := raw
	if a.out != nil {
		compact = append(a.out, raw[a.last:]...)
	}
	return reading{raw: raw, valid: true, whole: true, value: v, compact: compact, secretNames: a.secret}, true
}

// maxReadDepth bounds the nesting readWhole follows; deeper documents are
// left to the checks' own reading.
const maxReadDepth = 64

// hooks, set by tests only, are told of each look-up of a tool by name and
// each pass over a call's arguments, so that tests can hold every door to
// one of each per call.
type hooks struct {
	lookup func(name string)
	read   func()
}

// argReader is one pass over a document: its position is passed along,
// what it has found so far is kept here.
type argReader struct {
	b []byte
	// out is the compact form up to last, once white space between
	// tokens has been found (nil before).
	out  []byte
	last int
	// secret: a string passed so far may name a secret.
	secret bool
}

// space skips white space from i, leaving it out of the compact form.
func (a *argReader) space(i int) int {
	j := jsonx.SkipSpace(a.b, i)
	if j > i {
		if a.out == nil {
			a.out = make([]byte, 0, len(a.b))
		}
		a.out = append(a.out, a.b[a.last:i]...)
		a.last = j
	}
	return j
}

// value reads the value at i and returns it and the index after it.
func (a *argReader) value(i, depth int) (any, int, bool) {
	if i >= len(a.b) || depth > maxReadDepth {
		return nil, i, false
	}
	switch c := a.b[i]; {
	case c == '"':
		s, end, ok := a.str(i)
		return s, end, ok
	case c == '{':
		return a.object(i, depth)
	case c == '[':
		return a.array(i, depth)
	case c == 't' && hasLiteral(a.b[i:], "true"):
		return true, i + 4, true
	case c == 'f' && hasLiteral(a.b[i:], "false"):
		return false, i + 5, true
	case c == 'n' && hasLiteral(a.b[i:], "null"):
		return nil, i + 4, true
	case c == '-' || (c >= '0' && c <= '9'):
		end, ok := jsonx.NumberEnd(a.b, i)
		if !ok {
			return nil, i, false
		}
		return json.Number(a.b[i:end]), end, true
	}
	return nil, i, false
}

func (a *argReader) object(i, depth int) (any, int, bool) {
	m := map[string]any{}
	i = a.space(i + 1)
	if i < len(a.b) && a.b[i] == '}' {
		return m, i + 1, true
	}
	for i < len(a.b) && a.b[i] == '"' {
		k, end, ok := a.str(i)
		if !ok {
			return nil, i, false
		}
		i = a.space(end)
		if i >= len(a.b) || a.b[i] != ':' {
			return nil, i, false
		}
		v, end, ok := a.value(a.space(i+1), depth+1)
		if !ok {
			return nil, i, false
		}
		m[k] = v
		i = a.space(end)
		if i < len(a.b) && a.b[i] == '}' {
			return m, i + 1, true
		}
		if i >= len(a.b) || a.b[i] != ',' {
			return nil, i, false
		}
		i = a.space(i + 1)
	}
	return nil, i, false
}

func (a *argReader) array(i, depth int) (any, int, bool) {
	list := []any{}
	i = a.space(i + 1)
	if i < len(a.b) && a.b[i] == ']' {
		return list, i + 1, true
	}
	for i < len(a.b) {
		v, end, ok := a.value(i, depth+1)
		if !ok {
			return nil, i, false
		}
		list = append(list, v)
		i = a.space(end)
		if i < len(a.b) && a.b[i] == ']' {
			return list, i + 1, true
		}
		if i >= len(a.b) || a.b[i] != ',' {
			return nil, i, false
		}
		i = a.space(i + 1)
	}
	return nil, i, false
}

// str reads the string at i (its opening quote) as encoding/json decodes
// it; false when it is not JSON or not valid UTF-8.
func (a *argReader) str(i int) (string, int, bool) {
	ascii := true
	for j := i + 1; j < len(a.b); j++ {
		switch c := a.b[j]; {
		case c == '"':
			s := a.b[i+1 : j]
			if !ascii && !utf8.Valid(s) {
				return "", i, false
			}
			a.names(i, j+1)
			return string(s), j + 1, true
		case c == '\\':
			return a.escaped(i, j)
		case c < 0x20:
			return "", i, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", i, false
}

// escaped reads the string at i whose first escape is at j.
func (a *argReader) escaped(i, j int) (string, int, bool) {
	b := a.b
	out := append(make([]byte, 0, j-i+16), b[i+1:j]...)
	for j < len(b) {
		switch c := b[j]; {
		case c == '"':
			// The raw bytes are checked, escapes being ASCII: what the
			// escapes stand for is valid UTF-8 by construction.
			if !utf8.Valid(b[i+1 : j]) {
				return "", i, false
			}
			a.names(i, j+1)
			return string(out), j + 1, true
		case c == '\\':
			if j+1 >= len(b) {
				return "", i, false
			}
			var ok bool
			if out, j, ok = unescape(out, b, j); !ok {
				return "", i, false
			}
		case c < 0x20:
			return "", i, false
		default:
			out = append(out, c)
			j++
		}
	}
	return "", i, false
}

// names notes whether the string b[i:end] (quotes included) may name a
// secret, while its bytes are at hand. Outside strings a document has no
// letters such a name starts with but in true, false and null, which
// start none, so the strings together give what
// redact.MentionsSecretName of the whole document gives.
func (a *argReader) names(i, end int) {
	if !a.secret {
		a.secret = redact.MentionsSecretName(a.b[i:end])
	}
}

func hasLiteral(b []byte, lit string) bool {
	return len(b) >= len(lit) && string(b[:len(lit)]) == lit
}

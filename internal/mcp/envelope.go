package mcp

import (
	"bytes"
	"github.com/countbot/toolsvc/internal/jsonx"
	"slices"
)

// readEnvelope reads a tools/call message in one pass over body: it checks
// that body is JSON (what json.Valid accepts) nested no deeper than the
// SDK allows, that it is an object of the members jsonrpc, id, method and
// params only, and params (when given) an object of name, arguments and
// _meta only, and returns the raw values of those members, in that order
// (nil for one absent). The arguments are thus read once here and once by the
// registry. It refuses anything the SDK might read otherwise than these
// exact names: a key written with escapes (the SDK matches names exactly,
// encoding/json would fold case) or given twice.
func readEnvelope(body []byte) (msg [4][]byte, params [3][]byte, ok bool) {
	v := validator{b: body}
	msgKeys := [...]string{"jsonrpc", "id", "method", "params"}
	paramsKeys := [...]string{"name", "arguments", "_meta"}
	i := v.space(0)
	if i >= len(body) || body[i] != '{' {
		return msg, params, false
	}
	for i, ok = v.open(i); ok; {
		var k, at, end int
		if k, at, ok = v.member(i, msgKeys[:], msg[:]); !ok {
			break
		}
		if k != 3 {
			end, ok = v.value(at, 1)
		} else {
			end, ok = v.params(at, paramsKeys[:], params[:])
		}
		if !ok {
			break
		}
		msg[k] = body[at:end]
		var done bool
		if i, done, ok = v.next(end); done {
			return msg, params, ok && v.space(i) == len(body)
		}
	}
	return msg, params, false
}

// params reads the object of params at i, of the members keys only, into
// vals.
func (v validator) params(i int, keys []string, vals [][]byte) (int, bool) {
	if i >= len(v.b) || v.b[i] != '{' {
		return i, false
	}
	for i, ok := v.open(i); ok; {
		var k, at, end int
		if k, at, ok = v.member(i, keys, vals); !ok {
			break
		}
		if end, ok = v.value(at, 2); !ok {
			break
		}
		vals[k] = v.b[at:end]
		var done bool
		if i, done, ok = v.next(end); done {
			return i, ok
		}
	}
	return i, false
}

// validator checks JSON as json.Valid does, value by value, and bounds
// its nesting by maxDepth.
type validator struct{ b []byte }

func (v validator) space(i int) int { return jsonx.SkipSpace(v.b, i) }

// open starts the object at i: the index of its first member, and false
// when it has none (an empty object has no members readEnvelope wants).
func (v validator) open(i int) (int, bool) {
	i = v.space(i + 1)
	return i, i < len(v.b) && v.b[i] == '"'
}

// member reads the key at i, which must be one of keys not given before
// (vals[k] still nil) and written without escapes, and the colon after
// it: it returns the key's index in keys and where its value starts.
func (v validator) member(i int, keys []string, vals [][]byte) (k, at int, ok bool) {
	if i >= len(v.b) || v.b[i] != '"' {
		return 0, i, false
	}
	end, ok := v.str(i)
	if !ok {
		return 0, i, false
	}
	key := v.b[i+1 : end-1]
	k = slices.Index(keys, string(key))
	if k < 0 || vals[k] != nil || bytes.IndexByte(key, '\\') >= 0 {
		return 0, i, false
	}
	i = v.space(end)
	if i >= len(v.b) || v.b[i] != ':' {
		return 0, i, false
	}
	return k, v.space(i + 1), true
}

// next reads what follows a member's value ending at end: a comma and the
// next member (done false), or the object's end (done true, and the index
// after it).
func (v validator) next(end int) (i int, done, ok bool) {
	i = v.space(end)
	switch {
	case i < len(v.b) && v.b[i] == '}':
		return i + 1, true, true
	case i < len(v.b) && v.b[i] == ',':
		return v.space(i + 1), false, true
	}
	return i, true, false
}

// value checks the value at i, inside depth containers, and returns the
// index after it.
func (v validator) value(i, depth int) (int, bool) {
	if i >= len(v.b) {
		return i, false
	}
	switch c := v.b[i]; {
	case c == '"':
		return v.str(i)
	case c == '{' || c == '[':
		if depth+1 > maxDepth {
			return i, false
		}
		return v.container(i, depth+1)
	case c == 't':
		return v.literal(i, "true")
	case c == 'f':
		return v.literal(i, "false")
	case c == 'n':
		return v.literal(i, "null")
	case c == '-' || c >= '0' && c <= '9':
		return jsonx.NumberEnd(v.b, i)
	}
	return i, false
}

// container checks the object or array at i, itself at nesting depth.
func (v validator) container(i, depth int) (int, bool) {
	obj := v.b[i] == '{'
	closer := byte(']')
	if obj {
		closer = '}'
	}
	i = v.space(i + 1)
	if i < len(v.b) && v.b[i] == closer {
		return i + 1, true
	}
	for i < len(v.b) {
		if obj {
			if v.b[i] != '"' {
				return i, false
			}
			end, ok := v.str(i)
			if !ok {
				return i, false
			}
			if i = v.space(end); i >= len(v.b) || v.b[i] != ':' {
				return i, false
			}
			i = v.space(i + 1)
		}
		end, ok := v.value(i, depth)
		if !ok {
			return i, false
		}
		i = v.space(end)
		if i < len(v.b) && v.b[i] == closer {
			return i + 1, true
		}
		if i >= len(v.b) || v.b[i] != ',' {
			return i, false
		}
		i = v.space(i + 1)
	}
	return i, false
}

// str checks the string at i (its opening quote): no control character,
// only JSON's escapes. Like json.Valid, it does not check the UTF-8.
func (v validator) str(i int) (int, bool) { return jsonx.CheckedStringEnd(v.b, i) }

func (v validator) literal(i int, lit string) (int, bool) {
	if len(v.b)-i < len(lit) || string(v.b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

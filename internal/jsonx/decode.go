package jsonx

import (
	"encoding/json"
	"unicode/utf8"
)

// maxSimpleDepth bounds the nesting DecodeSimple follows; deeper documents
// are left to encoding/json.
const maxSimpleDepth = 64

// DecodeSimple decodes a well-formed JSON document (checked by the caller)
// into what a json.Decoder with UseNumber makes of it: map[string]any,
// []any, string, json.Number, bool and nil. It takes only documents whose
// strings hold no escape and are valid UTF-8, and false means "decode it
// with encoding/json": a call's arguments are small objects of plain
// strings and numbers, and the reflection of encoding/json was most of
// what reading them cost.
func DecodeSimple(b []byte) (any, bool) {
	i := SkipSpace(b, 0)
	v, end, ok := simpleValue(b, i, 0)
	if !ok || SkipSpace(b, end) != len(b) {
		return nil, false
	}
	return v, true
}

func simpleValue(b []byte, i, depth int) (any, int, bool) {
	if i >= len(b) || depth > maxSimpleDepth {
		return nil, i, false
	}
	switch c := b[i]; {
	case c == '"':
		return simpleString(b, i)
	case c == '{':
		return simpleObject(b, i, depth)
	case c == '[':
		return simpleArray(b, i, depth)
	case c == 't' && hasPrefix(b[i:], "true"):
		return true, i + 4, true
	case c == 'f' && hasPrefix(b[i:], "false"):
		return false, i + 5, true
	case c == 'n' && hasPrefix(b[i:], "null"):
		return nil, i + 4, true
	case c == '-' || (c >= '0' && c <= '9'):
		end := i + 1
		for end < len(b) && isNumberByte(b[end]) {
			end++
		}
		return json.Number(b[i:end]), end, true
	}
	return nil, i, false
}

// simpleObject reads the object at i.
func simpleObject(b []byte, i, depth int) (any, int, bool) {
	m := map[string]any{}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return m, i + 1, true
	}
	for i < len(b) {
		k, end, ok := simpleString(b, i)
		if !ok {
			return nil, i, false
		}
		i = SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return nil, i, false
		}
		v, end, ok := simpleValue(b, SkipSpace(b, i+1), depth+1)
		if !ok {
			return nil, i, false
		}
		m[k.(string)] = v
		i = SkipSpace(b, end)
		if i < len(b) && b[i] == '}' {
			return m, i + 1, true
		}
		if i >= len(b) || b[i] != ',' {
			return nil, i, false
		}
		i = SkipSpace(b, i+1)
	}
	return nil, i, false
}

// simpleArray reads the array at i.
func simpleArray(b []byte, i, depth int) (any, int, bool) {
	list := []any{}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return list, i + 1, true
	}
	for i < len(b) {
		v, end, ok := simpleValue(b, i, depth+1)
		if !ok {
			return nil, i, false
		}
		list = append(list, v)
		i = SkipSpace(b, end)
		if i < len(b) && b[i] == ']' {
			return list, i + 1, true
		}
		if i >= len(b) || b[i] != ',' {
			return nil, i, false
		}
		i = SkipSpace(b, i+1)
	}
	return nil, i, false
}

// simpleString reads the string at i when it holds no escape and is valid
// UTF-8 (it is then its bytes, as encoding/json reads it).
func simpleString(b []byte, i int) (any, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	ascii := true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s := b[i+1 : j]
			if !ascii && !utf8.Valid(s) {
				return nil, i, false
			}
			return string(s), j + 1, true
		case c == '\\' || c < 0x20:
			return nil, i, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, i, false
}

func hasPrefix(b []byte, p string) bool {
	return len(b) >= len(p) && string(b[:len(p)]) == p
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

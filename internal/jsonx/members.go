package jsonx

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// MemberDecoder is a struct that reads its fields from an object's members
// without encoding/json's reflection: DecodeMembers hands it each member,
// and the helpers below read the values as encoding/json would.
type MemberDecoder interface {
	// DecodeMember takes one member: its key and its value (one of the
	// forms DecodeMembers lets through). false: a member it does not
	// decode exactly as encoding/json would (an unknown key, a value of
	// another type); the whole object is then left to encoding/json.
	DecodeMember(key, val []byte) bool
}

// maxMembers bounds the members DecodeMembers takes (each key is compared
// with the ones before it).
const maxMembers = 16

// DecodeMembers hands each member of the JSON object b to d, and reports
// whether d took them all. It checks the syntax of all it reads, and takes
// only an object of at most 16 members whose keys hold no escape and are
// given once each (in any case: encoding/json matches names without
// regard to case), and whose values are strings without escapes, numbers,
// true, false, null, or arrays of such strings. false means "decode b with
// encoding/json"; d may then hold part of it, and must be reset.
func DecodeMembers(b []byte, d MemberDecoder) bool {
	var keys [maxMembers][]byte
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return SkipSpace(b, i+1) == len(b)
	}
	for n := 0; ; n++ {
		end, ok := plainStringEnd(b, i)
		if !ok || n == maxMembers {
			return false
		}
		key := b[i+1 : end-1]
		for _, k := range keys[:n] {
			if bytes.EqualFold(k, key) {
				return false
			}
		}
		keys[n] = key
		i = SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = SkipSpace(b, i+1)
		if end, ok = memberValueEnd(b, i); !ok || !d.DecodeMember(key, b[i:end]) {
			return false
		}
		i = SkipSpace(b, end)
		switch {
		case i < len(b) && b[i] == '}':
			return SkipSpace(b, i+1) == len(b)
		case i < len(b) && b[i] == ',':
			i = SkipSpace(b, i+1)
		default:
			return false
		}
	}
}

// memberValueEnd returns the end of the value at i when it is one that
// DecodeMembers takes.
func memberValueEnd(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		return plainStringEnd(b, i)
	case c == '[':
		return plainArrayEnd(b, i)
	case c == '-' || (c >= '0' && c <= '9'):
		return NumberEnd(b, i)
	case hasPrefix(b[i:], "true"):
		return i + 4, true
	case hasPrefix(b[i:], "false"):
		return i + 5, true
	case hasPrefix(b[i:], "null"):
		return i + 4, true
	}
	return i, false
}

// plainStringEnd returns the end of the string at i when it holds no
// escape and no control character and is valid UTF-8.
func plainStringEnd(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	ascii := true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, ascii || utf8.Valid(b[i+1:j])
		case c == '\\' || c < 0x20:
			return i, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return i, false
}

// plainArrayEnd returns the end of the array at i when it holds plain
// strings only.
func plainArrayEnd(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '[' {
		return i, false
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		end, ok := plainStringEnd(b, i)
		if !ok {
			return i, false
		}
		i = SkipSpace(b, end)
		switch {
		case i < len(b) && b[i] == ']':
			return i + 1, true
		case i < len(b) && b[i] == ',':
			i = SkipSpace(b, i+1)
		default:
			return i, false
		}
	}
}

// NumberEnd returns the end of the number at i, checked against JSON's
// grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?; false, with
// where the grammar failed, when it is not one.
func NumberEnd(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digitsEnd(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digitsEnd(b, i+1)
		if j == i+1 {
			return i, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digitsEnd(b, i)
		if j == i {
			return i, false
		}
		i = j
	}
	return i, true
}

func digitsEnd(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// The helpers below read a value DecodeMembers handed out, as
// encoding/json reads it into a field of their type; false: it would not
// (another type, a number that does not fit), or not without the helper
// knowing how (leave it to encoding/json).

// IsNull reports whether val is null, which encoding/json leaves a string,
// number or bool field alone for, and sets a pointer or slice to nil for.
func IsNull(val []byte) bool { return string(val) == "null" }

// String reads a string.
func String(val []byte) (string, bool) {
	if end, ok := plainStringEnd(val, 0); !ok || end != len(val) {
		return "", false
	}
	return string(val[1 : len(val)-1]), true
}

// Strings reads an array of strings; [] is an empty slice, not nil.
func Strings(val []byte) ([]string, bool) {
	if end, ok := plainArrayEnd(val, 0); !ok || end != len(val) {
		return nil, false
	}
	out := []string{}
	for i := SkipSpace(val, 1); i < len(val) && val[i] == '"'; {
		end, _ := plainStringEnd(val, i)
		out = append(out, string(val[i+1:end-1]))
		if i = SkipSpace(val, end); i < len(val) && val[i] == ',' {
			i = SkipSpace(val, i+1)
		}
	}
	return out, true
}

// Int reads an integer into an int: written without fraction or
// exponent, and within the int's range.
func Int(val []byte) (int, bool) {
	if end, ok := NumberEnd(val, 0); !ok || end != len(val) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(val), 10, strconv.IntSize)
	return int(n), err == nil
}

// Bool reads true or false.
func Bool(val []byte) (v, ok bool) {
	switch string(val) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

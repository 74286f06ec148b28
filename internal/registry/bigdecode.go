package registry

import (
	"encoding/json"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/countbot/toolsvc/internal/jsonx"
)

// bigString is the encoded length from which a top-level string argument
// is decoded on its own, straight into its field (see decodeBig).
const bigString = 64 << 10

// decodeBig decodes args, a valid JSON object, into v without the two
// copies encoding/json makes of a string with escapes (one unescaped, one
// for the Go string): each top-level string argument longer than minBig
// encoded bytes is unescaped once, into the memory its field then shares,
// and the small rest goes through encoding/json. So a 50 MB content costs
// 50 MB once more, not twice. ok is false when it does not apply (no big
// string, a field it cannot match exactly by its JSON name, a repeated
// key): the caller then decodes as usual.
func decodeBig[T any](args []byte, v *T, minBig int) bool {
	rv := reflect.ValueOf(v).Elem()
	if rv.Kind() != reflect.Struct {
		return false
	}
	mem, ok := topMembers(args)
	if !ok {
		return false
	}
	var small []byte
	type big struct {
		field []int
		raw   []byte
	}
	var bigs []big
	last := 0
	for _, m := range mem {
		val := args[m.start:m.end]
		if len(val) <= minBig || val[0] != '"' {
			continue
		}
		idx, ok := stringField(rv.Type(), m.key)
		if !ok {
			return false
		}
		small = append(small, args[last:m.start]...)
		small = append(small, `""`...)
		last = m.end
		bigs = append(bigs, big{idx, val})
	}
	if len(bigs) == 0 {
		return false
	}
	small = append(small, args[last:]...)
	if json.Unmarshal(small, v) != nil {
		return false
	}
	for _, b := range bigs {
		s, ok := unquote(b.raw)
		if !ok {
			return false
		}
		rv.FieldByIndex(b.field).SetString(s)
	}
	return true
}

// member is an object member: its key, and where its value lies.
type member struct {
	key        string
	start, end int
}

// topMembers lists the members of obj, a valid JSON object. ok is false
// for anything else, or a key written with escapes or given twice (in any
// case).
func topMembers(obj []byte) ([]member, bool) {
	var out []member
	i := jsonx.SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, false
	}
	i = jsonx.SkipSpace(obj, i+1)
	for i < len(obj) && obj[i] == '"' {
		end := jsonx.StringEnd(obj, i)
		key := string(obj[i+1 : end-1])
		if strings.IndexByte(key, '\\') >= 0 {
			return nil, false
		}
		for _, m := range out {
			// encoding/json matches names without regard to case.
			if strings.EqualFold(m.key, key) {
				return nil, false
			}
		}
		i = jsonx.SkipSpace(obj, jsonx.SkipSpace(obj, end)+1) // past the colon
		vend := jsonx.ValueEnd(obj, i)
		out = append(out, member{key, i, vend})
		i = jsonx.SkipSpace(obj, vend)
		if i < len(obj) && obj[i] == ',' {
			i = jsonx.SkipSpace(obj, i+1)
		}
	}
	return out, true
}

// stringField finds the exported string field of struct type t whose JSON
// name is exactly key (no ",string" option), as encoding/json would fill.
func stringField(t reflect.Type, key string) ([]int, bool) {
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if name == key {
			return f.Index, f.Type.Kind() == reflect.String && len(f.Index) == 1 && !strings.Contains(","+opts+",", ",string,")
		}
	}
	return nil, false
}

// unquote decodes a JSON string (quotes included) as encoding/json does,
// into one new buffer that the returned string shares.
func unquote(raw []byte) (string, bool) {
	if len(raw) < 2 {
		return "", false
	}
	s := raw[1 : len(raw)-1]
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			var ok bool
			if b, i, ok = unescape(b, s, i); !ok {
				return "", false
			}
		case c == '\\' || c == '"' || c < ' ':
			return "", false
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, unicode.ReplacementChar)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
		}
	}
	return unsafe.String(unsafe.SliceData(b), len(b)), true
}

// unescape appends the escape at s[i] to b.
func unescape(b, s []byte, i int) ([]byte, int, bool) {
	switch s[i+1] {
	case '"', '\\', '/':
		return append(b, s[i+1]), i + 2, true
	case 'b':
		return append(b, '\b'), i + 2, true
	case 'f':
		return append(b, '\f'), i + 2, true
	case 'n':
		return append(b, '\n'), i + 2, true
	case 'r':
		return append(b, '\r'), i + 2, true
	case 't':
		return append(b, '\t'), i + 2, true
	case 'u':
		r := hex4(s[i+2:])
		if r < 0 {
			return b, i, false
		}
		i += 6
		if utf16.IsSurrogate(r) {
			r2 := rune(-1)
			if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
				r2 = hex4(s[i+2:])
			}
			if dec := utf16.DecodeRune(r, r2); dec != unicode.ReplacementChar {
				return utf8.AppendRune(b, dec), i + 6, true
			}
			r = unicode.ReplacementChar
		}
		return utf8.AppendRune(b, r), i, true
	}
	return b, i, false
}

// hex4 reads four hex digits, or returns -1.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

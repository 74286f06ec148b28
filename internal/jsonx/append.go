package jsonx

import "unicode/utf8"

const hex = "0123456789abcdef"

// AppendString appends s as a JSON string, escaped as Marshal escapes it
// (encoding/json with HTML escaping off): invalid UTF-8 becomes U+FFFD, and
// U+2028 and U+2029 are escaped. Hand-written encoders of the hot paths
// (audit records, call results) use it instead of reflection.
func AppendString(b []byte, s string) []byte { return appendString(b, s, false) }

// AppendStringHTML is AppendString with <, > and & escaped as well, as
// json.Marshal escapes them.
func AppendStringHTML(b []byte, s string) []byte { return appendString(b, s, true) }

func appendString(b []byte, s string, html bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while none of them needs a look of its
		// own: most of a text is plain ASCII. A word that does is taken
		// byte by byte, and the next word is tried again whole.
		if i+8 <= len(s) && plain8(word8(s, i), html) {
			i += 8
			continue
		}
		for stop := min(i+8, len(s)); i < stop; {
			c := s[i]
			if c >= utf8.RuneSelf {
				r, size := utf8.DecodeRuneInString(s[i:])
				switch {
				case r == utf8.RuneError && size == 1:
					b = append(b, s[start:i]...)
					b = append(b, `\ufffd`...)
					start = i + size
				case r == '\u2028' || r == '\u2029':
					b = append(b, s[start:i]...)
					b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
					start = i + size
				}
				i += size
				continue
			}
			if c >= 0x20 && c != '"' && c != '\\' && !(html && (c == '<' || c == '>' || c == '&')) {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
		}
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// word8 is s[i:i+8] as a little-endian number; the compiler makes it one
// load.
func word8(s string, i int) uint64 {
	w := s[i : i+8]
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

const ones, highs = 0x0101010101010101, 0x8080808080808080

// plain8 reports whether none of the eight bytes in x is escaped or starts
// a multi-byte character: each is ASCII from 0x20 up, not '"' or '\\' (nor
// '<', '>' or '&' with html). The tests are the usual bit tricks on all
// bytes at once.
func plain8(x uint64, html bool) bool {
	if x&highs != 0 || (x-0x20*ones)&^x&highs != 0 || hasZero(x^('"'*ones)) || hasZero(x^('\\'*ones)) {
		return false
	}
	return !html || !(hasZero(x^('<'*ones)) || hasZero(x^('>'*ones)) || hasZero(x^('&'*ones)))
}

// hasZero reports whether a byte of v is zero; it is exact about whether,
// not about which.
func hasZero(v uint64) bool { return (v-ones)&^v&highs != 0 }

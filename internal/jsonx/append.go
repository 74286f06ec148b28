package jsonx

import (
	"math/bits"
	"unicode/utf8"
)

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
		// Eight bytes at a time: most of a text is plain ASCII, skipped
		// whole, and a word that is not is skipped to its first byte that
		// needs a look. The last few bytes are taken one at a time.
		if i+8 <= len(s) {
			m := special8(word8(s, i), html)
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) / 8
		}
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

// special8 marks, with the high bit of its byte, the bytes of x (eight of
// a string, the first lowest) that are escaped or start a multi-byte
// character: below 0x20, '"', '\\', 0x80 and up, and with html '<', '>'
// and '&'. These are the usual bit tricks on all bytes at once; a borrow
// can mark a byte above a marked one that is not special, never one below,
// so the lowest mark is exact.
func special8(x uint64, html bool) uint64 {
	m := x&highs | (x-0x20*ones)&^x&highs | zeroBytes(x^('"'*ones)) | zeroBytes(x^('\\'*ones))
	if html {
		m |= zeroBytes(x^('<'*ones)) | zeroBytes(x^('>'*ones)) | zeroBytes(x^('&'*ones))
	}
	return m
}

// zeroBytes marks the zero bytes of v, as special8 marks.
func zeroBytes(v uint64) uint64 { return (v - ones) &^ v & highs }

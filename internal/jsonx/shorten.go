package jsonx

import "unicode/utf8"

// MaxEncodedRune is the most bytes one character takes inside a JSON
// string: a surrogate pair written as two \u escapes.
const MaxEncodedRune = 12

// ShortenStrings returns doc, a valid JSON document, with every string
// value (not object keys) whose encoded form is longer than max bytes cut
// to its first max bytes, or a few more so that no escape, UTF-8 sequence
// or surrogate pair is split. A cut string decodes to a prefix of the
// original's text, and keeps more than max/MaxEncodedRune - 1 characters.
// It lets a document whose arguments hold one huge string be checked or
// summarised without decoding the string: what is looked at is small.
// changed is false (and doc returned as it is) when no string was cut.
func ShortenStrings(doc []byte, max int) (out []byte, changed bool) {
	for i := 0; i < len(doc); i++ {
		if doc[i] != '"' {
			if out != nil {
				out = append(out, doc[i])
			}
			continue
		}
		end := StringEnd(doc, i)
		if end-i-2 <= max || isKey(doc, end) {
			if out != nil {
				out = append(out, doc[i:end]...)
			}
			i = end - 1
			continue
		}
		if out == nil {
			out = append(make([]byte, 0, 4*max), doc[:i]...)
		}
		cut := cutPoint(doc, i+1, i+1+max)
		out = append(out, doc[i:cut]...)
		out = append(out, '"')
		i = end - 1
	}
	if out == nil {
		return doc, false
	}
	return out, true
}

// isKey reports whether the string ending at end is an object key: the
// next token is a colon.
func isKey(doc []byte, end int) bool {
	for ; end < len(doc); end++ {
		switch doc[end] {
		case ' ', '\t', '\n', '\r':
			continue
		case ':':
			return true
		}
		return false
	}
	return false
}

// cutPoint returns the first index at or after limit, within the string
// whose text starts at from, that begins a whole character: not inside an
// escape, a UTF-8 sequence, or between the halves of an escaped surrogate
// pair.
func cutPoint(doc []byte, from, limit int) int {
	i := from
	for i < limit {
		switch c := doc[i]; {
		case c == '\\' && doc[i+1] == 'u':
			// A high surrogate takes its low half with it.
			if isHighSurrogate(doc[i+2:i+6]) && i+11 < len(doc) && doc[i+6] == '\\' && doc[i+7] == 'u' {
				i += 12
			} else {
				i += 6
			}
		case c == '\\':
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			i++
			for i < len(doc) && doc[i]&0xC0 == 0x80 {
				i++
			}
		}
	}
	return i
}

func isHighSurrogate(hex []byte) bool {
	return (hex[0] == 'd' || hex[0] == 'D') && (hex[1] == '8' || hex[1] == '9' || hex[1] == 'a' || hex[1] == 'A' || hex[1] == 'b' || hex[1] == 'B')
}

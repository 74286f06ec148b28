// Package runes cuts text by characters rather than bytes, so a cut never
// splits a UTF-8 character: the audit log, read_file and web_fetch all
// bound what they return in characters.
package runes

// Prefix returns the first n characters of s, or s if it is shorter.
func Prefix(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s // fewer bytes than n, so fewer characters
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

// Shorten returns s when it has at most n characters, and else its first n
// characters followed by "...", for quoting a long name or URL in a message.
func Shorten(s string, n int) string {
	if p := Prefix(s, n); len(p) < len(s) {
		return p + "..."
	}
	return s
}

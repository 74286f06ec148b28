// Package runes cuts text by characters rather than bytes, so a cut never
// splits a UTF-8 character: the audit log, read_file and web_fetch bound
// what they return in characters, and every message that quotes a value
// (a caller's path or URL, a peer's error body, a model's answer) shortens
// it with Shorten. Plural picks a word's form for a count in such messages.
package runes

import (
	"strings"
	"unicode"
)

// Echo is the most characters of a caller's value that a message repeats:
// enough to recognise a path or URL, while a call that sends megabytes gets
// a short error back, not its own value again.
const Echo = 200

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

// Shorten returns s when it has at most n characters, and else its first
// n-1 characters, without trailing white space, followed by "…": at most n
// characters in all, the mark saying that the text goes on. It is the one
// way text is shortened for a message or a peer's size limit.
func Shorten(s string, n int) string {
	if n <= 0 {
		return ""
	}
	head := Prefix(s, n)
	if len(head) == len(s) {
		return s
	}
	return strings.TrimRightFunc(Prefix(head, n-1), unicode.IsSpace) + "…"
}

// Plural returns one when n is 1 and many otherwise: "1 entry", "2 entries".
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Package runes cuts text by characters rather than bytes, so a cut never
// splits a UTF-8 character: the audit log, read_file and web_fetch bound
// what they return in characters, and every message that quotes a value
// (a caller's path or URL, a peer's error body, a model's answer) shortens
// it with Shorten. Plural picks a word's form for a count in such messages;
// Distance tells how far a misspelt name is from a known one.
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

// Distance counts the insertions, deletions and substitutions of
// characters that turn a into b (Levenshtein): how far a misspelt name (a
// setting, a tool) is from one that exists.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

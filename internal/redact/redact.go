// Package redact removes known secret values from text before it leaves the
// service: tool results, audit records and log lines.
package redact

import (
	"sort"
	"strings"
)

// Mask replaces every secret found.
const Mask = "[REDACTED]"

// minLen is the shortest value treated as a secret; shorter ones would
// blank ordinary words.
const minLen = 8

// Redactor replaces secret values with Mask. The zero value and nil redact
// nothing.
type Redactor struct {
	r       *strings.Replacer
	secrets []string
}

// New returns a Redactor for the given secrets. Values shorter than eight
// characters are ignored.
func New(secrets ...string) *Redactor {
	var list []string
	for _, s := range secrets {
		if len(s) >= minLen {
			list = append(list, s)
		}
	}
	if len(list) == 0 {
		return &Redactor{}
	}
	// Longest first, so a secret that contains another is replaced whole.
	sort.Slice(list, func(i, j int) bool { return len(list[i]) > len(list[j]) })
	pairs := make([]string, 0, 2*len(list))
	for _, s := range list {
		pairs = append(pairs, s, Mask)
	}
	return &Redactor{r: strings.NewReplacer(pairs...), secrets: list}
}

// String returns s with every secret replaced.
func (r *Redactor) String(s string) string {
	if r == nil || r.r == nil {
		return s
	}
	return r.r.Replace(s)
}

// Hold returns the length of the longest end of s that is the beginning of
// a secret (but not a whole one). Text sent in pieces keeps that much back
// until the next piece, so a secret cut in two is still found.
func (r *Redactor) Hold(s string) int {
	if r == nil {
		return 0
	}
	n := 0
	for _, sec := range r.secrets {
		for k := min(len(sec)-1, len(s)); k > n; k-- {
			if strings.HasSuffix(s, sec[:k]) {
				n = k
				break
			}
		}
	}
	return n
}

package tools

import (
	"strings"
	"testing"
)

// TestEditedPieces: the pieces an edit is written from make the text
// strings.Replace makes, for one occurrence, several, and more than the
// pieces allowed.
func TestEditedPieces(t *testing.T) {
	for _, c := range []struct{ text, old, repl string }{
		{"one TWO three", "TWO", "2"},
		{"a-b-c-d-", "-", "<->"},
		{"xx", "x", ""},
		{strings.Repeat("ab", 3000), "b", "B!"},
	} {
		count := strings.Count(c.text, c.old)
		if got, want := strings.Join(edited(c.text, c.old, c.repl, count), ""), strings.ReplaceAll(c.text, c.old, c.repl); got != want {
			t.Errorf("edited(%.20q, %q, %q) = %.40q, want %.40q", c.text, c.old, c.repl, got, want)
		}
	}
}

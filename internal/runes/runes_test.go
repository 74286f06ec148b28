package runes

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPrefix(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 3, "hel"},
		{"hello", 5, "hello"},
		{"hello", 9, "hello"},
		{"你好世界", 2, "你好"},
		{"a你b", 2, "a你"},
		{"abc", 0, ""},
		{"", 3, ""},
	}
	for _, c := range cases {
		if got := Prefix(c.in, c.n); got != c.want {
			t.Errorf("Prefix(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestShorten(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 4, "hel…"},
		{"hello", 5, "hello"},
		{"hello", 1, "…"},
		{"hello", 0, ""},
		{"你好世界", 4, "你好世界"},  // 12 bytes, 4 characters: nothing cut
		{"你好世界", 3, "你好…"},   // never half a character
		{"a😀b😀c", 4, "a😀b…"}, // four-byte characters
		{"ab  cd", 5, "ab…"}, // no blank before the mark
		{"", 3, ""},
		{"\xff\xfe\xfd\xfc", 3, "\xff\xfe…"}, // a bad byte counts as one character
	}
	for _, c := range cases {
		if got := Shorten(c.in, c.n); got != c.want {
			t.Errorf("Shorten(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// TestShortenBounds: whatever the text, the result has at most n
// characters, is valid UTF-8 when the text is, and starts the text.
func TestShortenBounds(t *testing.T) {
	for _, unit := range []string{"a", "é", "你", "😀", "a\u0301", " "} {
		for _, k := range []int{0, 1, 199, 200, 201, 10000} {
			s := strings.Repeat(unit, k)
			got := Shorten(s, Echo)
			if n := utf8.RuneCountInString(got); n > Echo {
				t.Errorf("Shorten(%d × %q) has %d characters", k, unit, n)
			}
			if !utf8.ValidString(got) {
				t.Errorf("Shorten(%d × %q) is not valid UTF-8: %q", k, unit, got)
			}
			if !strings.HasPrefix(s, strings.TrimSuffix(got, "…")) {
				t.Errorf("Shorten(%d × %q) = %q does not start the text", k, unit, got)
			}
		}
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "entries", 1: "entry", 2: "entries", -1: "entries"} {
		if got := Plural(n, "entry", "entries"); got != want {
			t.Errorf("Plural(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestDistance: the edits between two names, counted by character.
func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"exec", "exec", 0}, {"", "abc", 3}, {"read_fil", "read_file", 1},
		{"wirte_file", "write_file", 2}, {"kitten", "sitting", 3}, {"héllo", "hello", 1},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

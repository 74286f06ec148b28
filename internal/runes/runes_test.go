package runes

import "testing"

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
		{"hello", 3, "hel..."},
		{"hello", 5, "hello"},
		{"你好世界", 4, "你好世界"},   // 12 bytes, 4 characters: nothing cut
		{"你好世界", 3, "你好世..."}, // never half a character
		{"", 3, ""},
	}
	for _, c := range cases {
		if got := Shorten(c.in, c.n); got != c.want {
			t.Errorf("Shorten(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

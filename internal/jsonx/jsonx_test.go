package jsonx

import "testing"

func TestMarshalKeepsHTMLCharacters(t *testing.T) {
	for _, c := range []struct {
		in   any
		want string
	}{
		{map[string]string{"cmd": "a && b > c <d>"}, `{"cmd":"a && b > c <d>"}`},
		{[]int{1, 2}, `[1,2]`},
		{"line\n", `"line\n"`},
	} {
		got, err := Marshal(c.in)
		if err != nil || string(got) != c.want {
			t.Errorf("Marshal(%v) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	if _, err := Marshal(func() {}); err == nil {
		t.Error("Marshal of a func: no error")
	}
}

// TestAppendStringMatchesMarshal: AppendString escapes what Marshal
// escapes, and nothing else.
func TestAppendStringMatchesMarshal(t *testing.T) {
	for _, s := range []string{
		"", "plain", "quote \" backslash \\ slash /", "nl \n cr \r tab \t bs \b ff \f",
		"bell \x07 nul \x00 us \x1f del \x7f", "<html>&amp;", "界 \u2028 \u2029 😀",
		"bad \xff\xfe end", "\xe2\x80", "cut \xf0\x9f\x98",
	} {
		want, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got[1:], want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("a\"b\\c\n\u2028\xff<>&")
	f.Fuzz(func(t *testing.T, s string) {
		want, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}

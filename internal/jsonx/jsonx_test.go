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

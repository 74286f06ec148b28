package approval

import (
	"strings"
	"testing"
)

// TestCanonical: documents a tool reads as one value have one canonical
// form; any change of value changes it.
func TestCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{` { "a" : [ 1 , 2 ] } `, `{"a":[1,2]}`},
		{`{"n":1.0}`, `{"n":1}`},
		{`{"n":1e0}`, `{"n":1}`},
		{`{"n":10e-1}`, `{"n":1}`},
		{`{"n":100}`, `{"n":1e2}`},
		{`{"n":1.5}`, `{"n":15e-1}`},
		{`{"n":-0.0}`, `{"n":0}`},
		{`{"n":0.000}`, `{"n":0}`},
		{`{"n":-12.50E+1}`, `{"n":-125}`},
		{`{"s":"\u0041\/\t"}`, `{"s":"A/\t"}`},
		{`{"s":"\u00e9"}`, `{"s":"é"}`},
		{`{"s":"\u0001"}`, `{"s":"\u0001"}`},
		{`[true,false,null,{}]`, `[true,false,null,{}]`},
		{`{"z":{"y":1,"x":[{"b":0,"a":0}]}}`, `{"z":{"x":[{"a":0,"b":0}],"y":1}}`},
	} {
		got, err := Canonical([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

// TestCanonicalTellsApart: values a float64 or a lax reader would take for
// one another hash differently.
func TestCanonicalTellsApart(t *testing.T) {
	for _, pair := range [][2]string{
		{`{"n":9007199254740993}`, `{"n":9007199254740992}`},
		{`{"n":0.1}`, `{"n":0.10000000000000001}`},
		{`{"n":1}`, `{"n":"1"}`},
		{`{"a":1}`, `{"a":1,"b":null}`},
		{`{"s":"a"}`, `{"s":"a "}`},
		{`[1,2]`, `[2,1]`},
	} {
		a, errA := Hash([]byte(pair[0]))
		b, errB := Hash([]byte(pair[1]))
		if errA != nil || errB != nil || a == b {
			t.Errorf("%s and %s: hashes %s and %s (%v, %v)", pair[0], pair[1], a, b, errA, errB)
		}
	}
}

// TestCanonicalRefuses: a member named twice (readers disagree on which
// wins), trailing data, bad JSON, bad UTF-8, too deep.
func TestCanonicalRefuses(t *testing.T) {
	for _, in := range []string{
		`{"a":1,"a":2}`,
		`{"x":{"a":1,"a":1}}`,
		`{"a":1} {"a":2}`,
		`{"a":}`,
		"{\"a\":\"\xff\"}",
		strings.Repeat("[", 300) + strings.Repeat("]", 300),
		`{"n":1e99999999999999999999}`,
	} {
		if got, err := Canonical([]byte(in)); err == nil {
			t.Errorf("Canonical(%.40s) = %s, want an error", in, got)
		}
	}
}

func FuzzCanonical(f *testing.F) {
	f.Add(`{"b":[1,2.50,{"c":"\u00e9"}],"a":-0}`)
	f.Fuzz(func(t *testing.T, in string) {
		c, err := Canonical([]byte(in))
		if err != nil {
			return
		}
		// The canonical form is its own canonical form.
		again, err := Canonical(c)
		if err != nil || string(again) != string(c) {
			t.Fatalf("Canonical(%q) = %q, whose canonical form is %q, %v", in, c, again, err)
		}
	})
}

package jsonx

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

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
// escapes, and nothing else; AppendStringHTML what json.Marshal escapes.
func TestAppendStringMatchesMarshal(t *testing.T) {
	for _, s := range []string{
		"", "plain", "quote \" backslash \\ slash /", "nl \n cr \r tab \t bs \b ff \f",
		"bell \x07 nul \x00 us \x1f del \x7f", "<html>&amp;", "界 \u2028 \u2029 😀",
		"bad \xff\xfe end", "\xe2\x80", "cut \xf0\x9f\x98",
	} {
		checkAppend(t, s)
	}
	// Each byte that needs a look of its own, at every place in and
	// around the eight-byte words the plain runs are skipped in.
	for _, c := range []string{"\"", "\\", "\n", "\x00", "\x1f", "<", ">", "&", "\x7f", "é", "\u2028", "\xff"} {
		for at := 0; at <= 24; at++ {
			checkAppend(t, strings.Repeat("a", at)+c+strings.Repeat("b", 24-at))
		}
	}
}

func checkAppend(t *testing.T, s string) {
	t.Helper()
	want, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
		t.Errorf("AppendString(%q) = %s, want %s", s, got[1:], want)
	}
	wantHTML, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendStringHTML([]byte("x"), s); string(got) != "x"+string(wantHTML) {
		t.Errorf("AppendStringHTML(%q) = %s, want %s", s, got[1:], wantHTML)
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("a\"b\\c\n\u2028\xff<>&")
	f.Fuzz(func(t *testing.T, s string) { checkAppend(t, s) })
}

// decodeStd is what DecodeSimple must make: json.Decoder with UseNumber.
func decodeStd(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// TestDecodeSimple: what DecodeSimple decodes is what encoding/json
// decodes, and it leaves escapes and invalid UTF-8 to encoding/json.
func TestDecodeSimple(t *testing.T) {
	for _, c := range []struct {
		doc string
		ok  bool
	}{
		{`{"path":"small.txt"}`, true},
		{` { "paths" : [ "a" , "b/c.txt" ] , "start_line" : 1 , "end_line" : 2e3 , "n" : -0.5E-2 } `, true},
		{`{"a":{"b":[true,false,null,{},[]]},"a":"dup"}`, true},
		{`{"unicode":"界 😀 é"}`, true},
		{`[]`, true},
		{`"x"`, true},
		{`123`, true},
		{`{"esc":"a\nb"}`, false},
		{`{"k\"":1}`, false},
		{"{\"bad\":\"\xff\"}", false},
	} {
		v, ok := DecodeSimple([]byte(c.doc))
		if ok != c.ok {
			t.Errorf("%s: ok %v, want %v", c.doc, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		want, err := decodeStd([]byte(c.doc))
		if err != nil || !reflect.DeepEqual(v, want) {
			t.Errorf("%s: %#v, want %#v (%v)", c.doc, v, want, err)
		}
	}
}

func FuzzDecodeSimple(f *testing.F) {
	for _, s := range []string{`{"path":"a.txt","start_line":1}`, `[1,"x",{"y":[null,true]}]`, `{"a":"\u00e9"}`, ` 1.5e3 `} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		if !json.Valid([]byte(doc)) {
			return
		}
		v, ok := DecodeSimple([]byte(doc))
		if !ok {
			return
		}
		want, err := decodeStd([]byte(doc))
		if err != nil || !reflect.DeepEqual(v, want) {
			t.Fatalf("%q: %#v, want %#v (%v)", doc, v, want, err)
		}
	})
}

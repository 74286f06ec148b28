package registry

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/countbot/toolsvc/internal/redact"
)

// depthOf is the deepest nesting of objects and arrays in a document,
// strings skipped.
func depthOf(b []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range b {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// FuzzReadWhole: the one reading of a call's arguments takes every
// document that is JSON and UTF-8 within its nesting bound, and nothing
// else, and finds in it what the separate readings it replaces find:
// the value encoding/json decodes (UseNumber), json.Compact's form and
// redact.MentionsSecretName's answer.
func FuzzReadWhole(f *testing.F) {
	for _, s := range []string{
		`{"path":"a.txt"}`, ` { "path" : "a.txt" , "n" : [ 1 , 2.5e-3 , -0 ] } `, `{"content":"line\nnext \"q\" \\ \/ \u00e9 \ud83d\ude00"}`,
		`{"a":"\ud800"}`, `{"a":"\ud800\u0041"}`, `{"a":"\udc00\ud800x"}`, `{"api_key":"x"}`, `{"p":"KEYBOARD"}`, `{"x":"\u0070"}`,
		`{"a":1,"a":2}`, `[]`, `null`, `"s"`, `{"a":01}`, `{"a":1.}`, `{"a":"\x"}`, "{\"a\":\"\x01\"}", "{\"a\":\"\xff\"}",
		`{"a":"é"}`, `{"a":tru}`, `{"a":1}x`, "", " ", `{"a":{"b":[{"c":null}]}}`, `{"t":true,"f":false}`,
		strings.Repeat("[", maxReadDepth+1) + strings.Repeat("]", maxReadDepth+1),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		raw := []byte(s)
		rd, ok := readWhole(raw)
		want := json.Valid(raw) && utf8.Valid(raw) && depthOf(raw) <= maxReadDepth+1
		if ok != want {
			t.Fatalf("%q: read %v, want %v (JSON, UTF-8, within the nesting bound)", s, ok, want)
		}
		if !ok {
			return
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(rd.value, v) {
			t.Errorf("%q: value %#v, encoding/json decodes %#v", s, rd.value, v)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(rd.compact, compact.Bytes()) {
			t.Errorf("%q: compact %q, json.Compact %q", s, rd.compact, compact.Bytes())
		}
		if m := redact.MentionsSecretName(raw); rd.secretNames != m {
			t.Errorf("%q: secret names %v, redact.MentionsSecretName %v", s, rd.secretNames, m)
		}
		if !rd.valid || !rd.whole || !bytes.Equal(rd.raw, raw) {
			t.Errorf("%q: %+v", s, rd)
		}
	})
}

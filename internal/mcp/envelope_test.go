package mcp

import (
	"encoding/json"
	"strings"
	"testing"
)

// nesting is the deepest nesting of objects and arrays in a document,
// strings skipped.
func nesting(body []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, b := range body {
		switch {
		case inString && escaped:
			escaped = false
		case inString && b == '\\':
			escaped = true
		case inString:
			inString = b != '"'
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			depth++
			deepest = max(deepest, depth)
		case b == '}' || b == ']':
			depth--
		}
	}
	return deepest
}

// FuzzValidator: the validator readEnvelope checks a message with takes
// what json.Valid takes, up to the SDK's nesting bound, and nothing else.
func FuzzValidator(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,-0.5e+3,true,false,null,"x\"\\\/\b\f\n\r\t\u00e9"]}`, ` [ ] `, `{}`, `"\xff"`, `01`, `1.`, `-`, `1e`, `.5`,
		`"\u12"`, `"\x"`, "\"\x01\"", `{"a" 1}`, `{"a":1,}`, `[1,]`, `tru`, `nul`, `{"a":1}}`, `[` + `"` + "\t",
		strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
		strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		body := []byte(s)
		v := validator{b: body}
		end, ok := v.value(v.space(0), 0)
		got := ok && v.space(end) == len(body)
		if want := json.Valid(body) && nesting(body) <= maxDepth; got != want {
			t.Fatalf("%q: validator %v, json.Valid within the nesting bound %v", s, got, want)
		}
	})
}

// TestReadEnvelope: the members of a tools/call, and what it leaves to
// the SDK.
func TestReadEnvelope(t *testing.T) {
	msg, params, ok := readEnvelope([]byte(` {"params":{"arguments":{"a":[1,"}"]},"name":"x"},"method":"tools/call","id":7,"jsonrpc":"2.0"} `))
	if !ok || string(msg[0]) != `"2.0"` || string(msg[1]) != "7" || string(msg[2]) != `"tools/call"` ||
		string(params[0]) != `"x"` || string(params[1]) != `{"a":[1,"}"]}` {
		t.Errorf("read %q %q %v", msg, params, ok)
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","jsonrpc":"2.0"}`,            // twice
		`{"jsonrpc":"2.0","other":1}`,                  // another member
		`{"jsonr\u0070c":"2.0"}`,                       // an escaped key
		`{"params":{"name":"x","task":{}}}`,            // another parameter
		`{"params":[1]}`,                               // params not an object
		`{"params":{"name":"x","arguments":{"a":1,}}}`, // arguments not JSON
		`{"jsonrpc":"2.0"} x`,                          // something after it
		`[{"jsonrpc":"2.0"}]`,                          // a batch
		`{"params":{"arguments":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}}`, // too deep
	} {
		if _, _, ok := readEnvelope([]byte(body)); ok {
			t.Errorf("%s: taken", body)
		}
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// TestArgumentsAsModelsSendThem sends numbers the way models write them:
// an integral value written as 5.0 or 5e0 is an integer (JSON Schema says
// so) and reaches the tool's int fields.
func TestArgumentsAsModelsSendThem(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	s.writeWS(t, "five.txt", "one\ntwo\nthree\nfour\nfive\n")
	for _, args := range []string{
		`{"path":"five.txt","start_line":2.0,"end_line":3e0}`,
		`{"path":"five.txt","start_line":2,"end_line":0.3e1}`,
		`{"path":"five.txt","start_line":20e-1,"end_line":3.000}`,
	} {
		out := mustSucceed(t, s.invoke(t, "read_file", args))
		assertContains(t, args, out, "two", "three")
		if strings.Contains(out, "four") || strings.Contains(out, "one") {
			t.Errorf("%s: lines outside 2..3: %s", args, out)
		}
	}
	mustSucceed(t, s.invoke(t, "memory", `{"action":"write","content":"likes tea"}`))
	assertContains(t, "memory read", mustSucceed(t, s.invoke(t, "memory", `{"action":"read","recent_count":5.0}`)), "likes tea")
}

// TestArgumentErrorsHaveOneForm checks that every kind of argument problem,
// from the schema, from a rule between parameters or from a value no Go
// integer holds, reads the same way, in a stable order, and bounded.
func TestArgumentErrorsHaveOneForm(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	s.writeWS(t, "a.txt", "x\n")
	prefix := func(tool string) string { return "Error: Invalid parameters for tool '" + tool + "': " }
	exact := []struct {
		name, tool, args, want string
	}{
		{"beyond int64", "read_file", `{"path":"a.txt","start_line":1e30}`,
			"start_line must be <= 9223372036854775807"},
		{"beyond int64, integer literal", "read_file", `{"path":"a.txt","end_line":99999999999999999999}`,
			"end_line must be <= 9223372036854775807"},
		{"huge exponent", "read_file", `{"path":"a.txt","start_line":1e999999}`,
			"start_line must be a number with an exponent between -400 and 400, not 1e999999"},
		{"both path and paths, lines reversed, unknown names", "read_file",
			`{"zeta":1,"paths":["a.txt"],"alpha":2,"end_line":2.0,"path":"a.txt","start_line":5,"mid":3}`,
			"unknown parameter alpha; unknown parameter mid; path and paths must not both be given (exactly one of them); start_line must be <= end_line, but 5 > 2; unknown parameter zeta"},
		{"neither url nor urls", "web_fetch", `{"maxChars":"x"}`,
			"maxChars should be integer, not string; missing required url or urls (exactly one of them)"},
		{"memory write without content", "memory", `{"action":"write","keywords":"x"}`,
			"missing required content (action=write needs content)"},
		{"memory search with blank keywords", "memory", `{"action":"search","keywords":"  "}`,
			"keywords must not be blank (action=search needs keywords)"},
		{"memory read range reversed", "memory", `{"action":"read","start_line":9,"end_line":3}`,
			"start_line must be <= end_line, but 9 > 3"},
	}
	for _, c := range exact {
		t.Run(c.name, func(t *testing.T) {
			// Several times: problems come out of maps, the order must not.
			for range 5 {
				res := s.invoke(t, c.tool, c.args)
				if res.Error == nil || res.Error.Code != toolerr.InvalidArguments || res.Result != prefix(c.tool)+c.want {
					t.Fatalf("got %+v\nwant %s%s", res, prefix(c.tool), c.want)
				}
				if strings.Contains(res.Result, "json:") || strings.Contains(res.Result, "Go ") {
					t.Errorf("a Go decoder message reached the model: %s", res.Result)
				}
			}
		})
	}

	t.Run("bounded", func(t *testing.T) {
		args := map[string]any{"path": "a.txt"}
		for i := range 500 {
			args[fmt.Sprintf("%03d_%s", i, strings.Repeat("n", 300))] = i
		}
		res := s.invoke(t, "read_file", args)
		mustFail(t, res, toolerr.InvalidArguments, "unknown parameter \"000_nnn", "and 490 more problems")
		if len(res.Result) > 2200 {
			t.Errorf("the message is %d bytes long", len(res.Result))
		}
	})

	t.Run("rules in the descriptions", func(t *testing.T) {
		for tool, wants := range map[string][]string{
			"read_file": {"Give exactly one of path and paths.", "start_line must not be greater than end_line."},
			"web_fetch": {"Give exactly one of url and urls."},
			"memory":    {"action=write requires content.", "action=search requires keywords.", "start_line must not be greater than end_line."},
		} {
			_, body := s.do(t, "GET", "/tools/"+tool, nil, nil)
			var def registry.Definition
			if err := json.Unmarshal(body, &def); err != nil {
				t.Fatal(err)
			}
			assertContains(t, tool+" description", def.Function.Description, wants...)
		}
	})
}

// TestBodiesThatAreNotAnObject sends what is not a JSON object: each is
// refused with a message that says what to send instead.
func TestBodiesThatAreNotAnObject(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	next := `Next: send the arguments as one JSON object of named parameters, such as {"path": "..."} (an empty body means {}).`
	cases := []struct {
		name, body, code string
		wants            []string
	}{
		{"spaces", "   ", toolerr.MalformedArguments, []string{"only whitespace (3 bytes)", next}},
		{"newlines and tabs", "\n\t\r\n", toolerr.MalformedArguments, []string{"only whitespace", next}},
		{"no-break space", "\u00a0", toolerr.MalformedArguments, []string{"only whitespace", next}},
		{"line separator", "\u2028\u2029", toolerr.MalformedArguments, []string{"only whitespace", next}},
		{"invalid UTF-8", "{\"path\":\"a\xff\"}", toolerr.MalformedArguments, []string{"not valid UTF-8", "offset 10", next}},
		{"array", `["a.txt"]`, toolerr.InvalidArguments, []string{"must be a JSON object, not an array", next}},
		{"string", `"a.txt"`, toolerr.InvalidArguments, []string{"must be a JSON object, not a string", next}},
		{"null", `null`, toolerr.InvalidArguments, []string{"must be a JSON object, not null", next}},
		{"number", `7`, toolerr.InvalidArguments, []string{"must be a JSON object, not a number", next}},
		{"object after a no-break space", "\u00a0{\"path\":\"a.txt\"}", toolerr.MalformedArguments, []string{"byte 0 is U+00A0, which JSON does not allow outside strings"}},
		{"object after a byte-order mark", "\ufeff{\"path\":\"a.txt\"}", toolerr.MalformedArguments, []string{"byte 0 is U+FEFF"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mustFail(t, s.invoke(t, "read_file", c.body), c.code, c.wants...)
		})
	}
	// The memory example names its required parameter.
	mustFail(t, s.invoke(t, "memory", "[]"), toolerr.InvalidArguments, `such as {"action": "write"}`)
}

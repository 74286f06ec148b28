package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/xeipuuv/gojsonschema"
)

func TestNormalizeNumbers(t *testing.T) {
	cases := []struct{ in, want, problem string }{
		{`{"a":5.0}`, `{"a":5}`, ""},
		{`{"a":5e0,"b":[1.0,2.5,-3E2]}`, `{"a":5,"b":[1,2.5,-300]}`, ""},
		{`{"a":{"b":0.5e1}}`, `{"a":{"b":5}}`, ""},
		{`{"a":1e30}`, `{"a":1e30}`, ""}, // integral but beyond int64: Decode reports it
		{`{"a":7}`, `{"a":7}`, ""},       // untouched
		{`{"a":1e401}`, "", "a must be a number with an exponent between -400 and 400, not 1e401"},
		{`{"a":[1e-9999]}`, "", "a[0] must be a number with an exponent between -400 and 400"},
		{`{"a":` + strings.Repeat("9", 401) + `}`, "", "a is a number of 401 digits"},
	}
	for _, c := range cases {
		var v map[string]any
		dec := json.NewDecoder(strings.NewReader(c.in))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		var pl problemList
		normalizeNumbers(v, "", &pl)
		if c.problem != "" {
			if len(pl.list) != 1 || !strings.HasPrefix(pl.list[0].text, c.problem) {
				t.Errorf("%s: problems %+v, want %q", c.in, pl.list, c.problem)
			}
			continue
		}
		out, _ := json.Marshal(v)
		if string(out) != c.want || len(pl.list) != 0 {
			t.Errorf("%s -> %s %+v, want %s", c.in, out, pl.list, c.want)
		}
	}
}

func TestDecodeErrorsInSchemaForm(t *testing.T) {
	type args struct {
		N     int     `json:"n"`
		Small int8    `json:"small"`
		U     uint    `json:"u"`
		Tags  []int   `json:"tags"`
		F     float64 `json:"f"`
	}
	cases := []struct{ in, want string }{
		{`{"n":1e30}`, "n must be <= 9223372036854775807"},
		{`{"n":-99999999999999999999}`, "n must be >= -9223372036854775808"},
		{`{"small":300}`, "small must be <= 127"},
		{`{"u":-1}`, "u must be >= 0"},
		{`{"tags":[1,1e20]}`, "tags must be <= 9223372036854775807"},
		{`{"n":"x"}`, "n should be integer, not string"},
	}
	for _, c := range cases {
		_, err := Decode[args](json.RawMessage(c.in))
		var ae *argumentsError
		if !errors.As(err, &ae) || len(ae.problems) != 1 || ae.problems[0].text != c.want {
			t.Errorf("%s: %v, want %q", c.in, err, c.want)
		}
		if code := toolerr.ErrorCode(err); code != toolerr.InvalidArguments {
			t.Errorf("%s: code %q", c.in, code)
		}
	}
}

func TestFormatProblemsSortedAndBounded(t *testing.T) {
	ps := []problem{{"b", "b is wrong"}, {"a", "a is wrong"}, {"b", "b is wrong"}, {"", "arguments: x"}}
	if got := formatProblems("t", ps, 0); got != "Invalid parameters for tool 't': arguments: x; a is wrong; b is wrong" {
		t.Errorf("got %q", got)
	}
	ps = nil
	for i := range 50 {
		ps = append(ps, problem{fmt.Sprintf("p%02d", i), fmt.Sprintf("p%02d %s", i, strings.Repeat("x", 500))})
	}
	got := formatProblems("t", ps, 7)
	if len(got) > maxMessageChars+100 || !strings.HasSuffix(got, "; and 48 more problems") || !strings.Contains(got, "p00 xxx") {
		t.Errorf("%d bytes: ...%s", len(got), got[max(len(got)-200, 0):])
	}
}

// BenchmarkCheckArguments compares the whole argument check (decode,
// number normalisation, schema, rules) with the schema validation alone it
// wraps, on typical arguments. Compare the two as a ratio within one run.
func BenchmarkCheckArguments(b *testing.B) {
	tool := &fakeTool{name: "rich", schema: richSchema}
	r := New(Options{})
	if err := r.Register(tool); err != nil {
		b.Fatal(err)
	}
	e := r.tools["rich"]
	for _, c := range []struct{ name, args string }{
		{"small", `{"name":"abc","count":3}`},
		{"float integers", `{"name":"abc","count":3.0,"ratio":0.5,"tags":["a","b"],"opts":{"depth":2e0}}`},
		{"nested", `{"name":"abc","tags":["xyz"],"opts":{"depth":1,"inner":{"x":1}},"items":[{"id":1},{"id":2}],"color":"red","flag":true}`},
	} {
		args := []byte(c.args)
		b.Run(c.name+"/schema only", func(b *testing.B) {
			for b.Loop() {
				if _, err := e.schema.Validate(gojsonschema.NewBytesLoader(args)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/full check", func(b *testing.B) {
			for b.Loop() {
				if _, code, msg := checkArguments(e, "rich", args); code != "" {
					b.Fatal(msg)
				}
			}
		})
	}
}

package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/xeipuuv/gojsonschema"
)

// schemaTool is a tool with a given schema and nothing else.
type schemaTool struct {
	name   string
	params json.RawMessage
}

func (t schemaTool) Name() string                { return t.name }
func (t schemaTool) Description() string         { return "a schema" }
func (t schemaTool) Parameters() json.RawMessage { return t.params }
func (t schemaTool) Execute(context.Context, json.RawMessage) (string, error) {
	return "", nil
}

// toolSchemas are the parameters of every built-in tool, by tool name, as
// internal/app's tests keep them in testdata.
func toolSchemas(t *testing.T) map[string]json.RawMessage {
	data, err := os.ReadFile("testdata/tool_schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if len(out) < 13 {
		t.Fatalf("only %d tool schemas found", len(out))
	}
	return out
}

// TestFastSchemaAgrees: over the built-in tools' schemas and thousands of
// argument objects made from their properties (values of the right and
// the wrong type, at and beyond every bound, missing and unknown
// properties), checkArguments answers the same, byte for byte, with the
// fast form of the schema and with the library alone; the fast form
// never accepts what the library refuses, and accepts everything the
// library accepts whose numbers are integers of 64 bits.
func TestFastSchemaAgrees(t *testing.T) {
	names := []string{}
	schemas := toolSchemas(t)
	for name := range schemas {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		params := schemas[name]
		t.Run(name, func(t *testing.T) {
			e, err := newEntry(schemaTool{name, params}, "")
			if err != nil {
				t.Fatal(err)
			}
			if e.fast == nil {
				// Only the library checks it: nothing to compare.
				t.Skipf("no fast form for %s", params)
			}
			slow := *e
			slow.fast = nil
			var schema any
			json.Unmarshal(params, &schema)
			r := rand.New(rand.NewPCG(7, uint64(len(name))))
			accepted, valid := 0, 0
			for i := range 1000 {
				v := objectValue(r, schema.(map[string]any), i%4 == 0)
				var nums problemList
				normalizeNumbers(v, "", &nums)
				res, err := e.schema.Validate(gojsonschema.NewRawLoader(v))
				if err != nil {
					t.Fatal(err)
				}
				fast := e.fast.accepts(v)
				raw, _ := json.Marshal(v)
				switch {
				case fast && !res.Valid():
					t.Fatalf("fast form accepts %s, the library refuses it: %v", raw, res.Errors())
				case !fast && res.Valid() && allInt64(v):
					t.Errorf("fast form leaves %s to the library, which accepts it", raw)
				}
				if fast {
					accepted++
				}
				if res.Valid() {
					valid++
				}
				a1, c1, m1 := checkArguments(e, name, raw)
				a2, c2, m2 := checkArguments(&slow, name, raw)
				if string(a1) != string(a2) || c1 != c2 || m1 != m2 {
					t.Fatalf("%s:\nfast: %s %s %s\nslow: %s %s %s", raw, a1, c1, m1, a2, c2, m2)
				}
			}
			t.Logf("%d of 1000 accepted by the fast form, %d valid", accepted, valid)
			if accepted == 0 || valid == 1000 {
				t.Errorf("the cases miss one side")
			}
		})
	}
}

// allInt64 reports whether every number in v is an integer literal of 64
// bits.
func allInt64(v any) bool {
	switch x := v.(type) {
	case json.Number:
		_, err := strconv.ParseInt(string(x), 10, 64)
		return err == nil
	case map[string]any:
		for _, el := range x {
			if !allInt64(el) {
				return false
			}
		}
	case []any:
		for _, el := range x {
			if !allInt64(el) {
				return false
			}
		}
	}
	return true
}

// objectValue makes an arguments object for an object schema: a random
// subset of its properties with values near their bounds, sometimes a
// required one left out or an unknown one added; with valid, every
// required property and only good values.
func objectValue(r *rand.Rand, s map[string]any, valid bool) map[string]any {
	obj := map[string]any{}
	props, _ := s["properties"].(map[string]any)
	req := map[string]bool{}
	if list, ok := s["required"].([]any); ok {
		for _, n := range list {
			req[n.(string)] = true
		}
	}
	for name, p := range props {
		if !req[name] && r.IntN(2) == 0 {
			continue
		}
		if req[name] && !valid && r.IntN(10) == 0 {
			continue
		}
		obj[name] = value(r, p.(map[string]any), valid)
	}
	if !valid && r.IntN(8) == 0 {
		obj["not_a_parameter"] = "x"
	}
	return obj
}

func value(r *rand.Rand, s map[string]any, valid bool) any {
	if !valid && r.IntN(6) == 0 {
		return [...]any{nil, true, json.Number("3"), json.Number("2.5"), "text", []any{}, map[string]any{}}[r.IntN(7)]
	}
	num := func(k string) (int, bool) {
		n, ok := s[k].(float64)
		return int(n), ok
	}
	// near picks a count around the schema's bounds, inside them when
	// valid.
	near := func(lo, hi int, hasLo, hasHi bool) int {
		if !hasLo {
			lo = 0
		}
		if !hasHi {
			hi = lo + 5
		}
		cands := []int{lo, hi, lo + 1, (lo + hi) / 2}
		if !valid {
			cands = append(cands, lo-1, hi+1)
		}
		return max(cands[r.IntN(len(cands))], 0)
	}
	switch s["type"] {
	case "string":
		if enum, ok := s["enum"].([]any); ok {
			if valid || r.IntN(2) == 0 {
				return enum[r.IntN(len(enum))]
			}
			return strings.ToUpper(enum[0].(string))
		}
		lo, hasLo := num("minLength")
		hi, hasHi := num("maxLength")
		n := near(lo, hi, hasLo, hasHi)
		if hasHi && hi > 200 && r.IntN(20) > 0 {
			n = r.IntN(30) + lo // the long bounds, seldom
		}
		return strings.Repeat([]string{"a", "界", "😀", " "}[r.IntN(4)], n)
	case "integer":
		lo, hasLo := num("minimum")
		hi, hasHi := num("maximum")
		n := near(lo, hi, hasLo, hasHi)
		if !hasLo && !valid {
			n -= 3
		}
		switch {
		case !valid && r.IntN(8) == 0:
			return json.Number("1.5")
		case !valid && r.IntN(8) == 0:
			return json.Number("123456789012345678901234")
		case r.IntN(8) == 0:
			return json.Number(fmt.Sprintf("%d.0", n))
		case r.IntN(8) == 0:
			return json.Number(fmt.Sprintf("%de0", n))
		}
		return json.Number(strconv.Itoa(n))
	case "boolean":
		return r.IntN(2) == 0
	case "array":
		lo, hasLo := num("minItems")
		hi, hasHi := num("maxItems")
		n := near(lo, hi, hasLo, hasHi)
		items, _ := s["items"].(map[string]any)
		list := make([]any, n)
		for i := range list {
			if items == nil {
				list[i] = "x"
				continue
			}
			list[i] = value(r, items, valid)
		}
		return list
	case "object":
		return objectValue(r, s, valid)
	}
	return nil
}

// TestCompileFast: schemas with a keyword or a value outside the fast
// form are left to the library whole.
func TestCompileFast(t *testing.T) {
	for _, c := range []struct {
		schema string
		fast   bool
	}{
		{`{"type":"object","properties":{"a":{"type":"string","minLength":1}}}`, true},
		{`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":10}},"required":["n"],"additionalProperties":false}`, true},
		{`{"type":"object","properties":{"l":{"type":"array","items":{"type":"string"},"maxItems":3}}}`, true},
		{`{"type":"object","properties":{"a":{"type":"string","pattern":"^a"}}}`, false},
		{`{"type":"object","properties":{"a":{"type":["string","null"]}}}`, false},
		{`{"type":"object","properties":{"a":{"type":"null"}}}`, false},
		{`{"type":"object","properties":{"a":{"anyOf":[{"type":"string"}]}}}`, false},
		{`{"type":"object","properties":{"a":{"type":"number","minimum":0.5}}}`, false},
		{`{"type":"object","properties":{"a":{"type":"integer","exclusiveMinimum":0}}}`, false},
		{`{"type":"object","properties":{"a":{"type":"string","enum":["x",1]}}}`, false},
		{`{"type":"object","properties":{"a":{"type":"string","minimum":1}}}`, false},
		{`{"type":"object","properties":{"a":{"description":"no type"}}}`, false},
		{`{"type":"object","additionalProperties":{"type":"string"}}`, false},
		{`{"type":"object","properties":{"a":{"type":"string","default":"x"}}}`, false},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`, false},
		{`{"type":"array"}`, false},
	} {
		if got := compileFast(json.RawMessage(c.schema)) != nil; got != c.fast {
			t.Errorf("%s: fast form %v, want %v", c.schema, got, c.fast)
		}
	}
}

// FuzzFastSchema: for any arguments, the fast form of read_file's schema
// and of a schema with every keyword it knows never accepts what the
// library refuses.
func FuzzFastSchema(f *testing.F) {
	schemas := []string{
		`{"type":"object","properties":{"path":{"type":"string","minLength":1,"maxLength":4096},"paths":{"type":"array","items":{"type":"string","minLength":1,"maxLength":4096},"minItems":1,"maxItems":20},"start_line":{"type":"integer","minimum":1},"end_line":{"type":"integer","minimum":1},"show_line_numbers":{"type":"boolean"}},"additionalProperties":false}`,
		`{"type":"object","properties":{"m":{"type":"string","enum":["a","b"]},"n":{"type":"number","minimum":-3,"maximum":3},"o":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}},"required":["m"]}`,
	}
	type compiled struct {
		fast   *fastSchema
		schema *gojsonschema.Schema
	}
	var cs []compiled
	for _, s := range schemas {
		sch, err := compileSchema(json.RawMessage(s))
		if err != nil {
			f.Fatal(err)
		}
		cs = append(cs, compiled{compileFast(json.RawMessage(s)), sch})
	}
	for _, seed := range []string{`{"path":"a"}`, `{"paths":["a","b"],"start_line":1e2}`, `{"m":"a","n":-3,"o":{"x":5.0}}`, `{"m":"c","n":4}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, args string) {
		var v any
		dec := json.NewDecoder(strings.NewReader(args))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			return
		}
		var nums problemList
		normalizeNumbers(v, "", &nums)
		for i, c := range cs {
			if !c.fast.accepts(v) {
				continue
			}
			res, err := c.schema.Validate(gojsonschema.NewRawLoader(v))
			if err != nil || !res.Valid() {
				t.Fatalf("schema %d: fast form accepts %s, the library refuses it (%v)", i, args, err)
			}
		}
	})
}

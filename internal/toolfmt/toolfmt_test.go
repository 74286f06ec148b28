package toolfmt

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/registry"
)

// TestGeminiSchema: the JSON Schema features Gemini refuses are rewritten
// or dropped, recursively, and the input is left as it was.
func TestGeminiSchema(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}}}`,
			`{"properties":{"a":{"type":"STRING"}},"type":"OBJECT"}`},
		{`{"type":["string","null"],"description":"d"}`, `{"description":"d","nullable":true,"type":"STRING"}`},
		{`{"type":"integer","enum":[1,2]}`, `{"description":"One of [1,2].","type":"INTEGER"}`},
		{`{"type":"string","enum":["x","y"],"const":"x"}`, `{"enum":["x","y"],"format":"enum","type":"STRING"}`},
		{`{"type":"string","format":"uri"}`, `{"type":"STRING"}`},
		{`{"type":"integer","format":"int64","exclusiveMinimum":0}`, `{"format":"int64","type":"INTEGER"}`},
		{`{"type":"array","items":{"type":"object","additionalProperties":true,"properties":{"n":{"type":"number"}}}}`,
			`{"items":{"properties":{"n":{"type":"NUMBER"}},"type":"OBJECT"},"type":"ARRAY"}`},
		{`{"anyOf":[{"type":"string"},{"type":"integer","not":{}}]}`, `{"anyOf":[{"type":"STRING"},{"type":"INTEGER"}]}`},
	} {
		var in map[string]any
		if err := json.Unmarshal([]byte(tc.in), &in); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(GeminiSchema(in))
		if string(got) != tc.want {
			t.Errorf("GeminiSchema(%s)\n = %s\nwant %s", tc.in, got, tc.want)
		}
		if again, _ := json.Marshal(in); !jsonEqual(t, string(again), tc.in) {
			t.Errorf("GeminiSchema changed its input: %s", again)
		}
	}
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		t.Fatalf("not JSON: %s / %s", a, b)
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

// TestRenderKeepsSchemaBytes: Responses and Anthropic carry the schema's
// bytes as the registry has them; an unknown format names the known ones.
func TestRenderKeepsSchemaBytes(t *testing.T) {
	params := `{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"integer"}}}`
	defs := []registry.Definition{{Type: "function", Function: registry.FunctionSchema{Name: "t", Description: "d <&>", Parameters: json.RawMessage(params)}}}
	for format, want := range map[string]string{
		Responses: `[{"type":"function","name":"t","description":"d <&>","parameters":` + params + `,"strict":false}]`,
		Anthropic: `[{"name":"t","description":"d <&>","input_schema":` + params + `}]`,
	} {
		got, err := Render(defs, format)
		if err != nil || string(got) != want {
			t.Errorf("Render(%s) = %s, %v\nwant %s", format, got, err, want)
		}
	}
	if _, err := Render(defs, "claude"); err == nil || !strings.Contains(err.Error(), "openai, responses, anthropic, gemini") {
		t.Errorf("unknown format: %v", err)
	}
}

func TestStrictSchema(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{`{"type":"object","properties":{"a":{"type":"string","enum":["x"]},"b":{"type":"integer"}},"required":["b"]}`,
			`{"additionalProperties":false,"properties":{"a":{"enum":["x",null],"type":["string","null"]},"b":{"type":"integer"}},"required":["a","b"],"type":"object"}`, ""},
		{`{"type":"object","properties":{"o":{"type":"object","properties":{"c":{"type":"boolean"}}}}}`,
			`{"additionalProperties":false,"properties":{"o":{"additionalProperties":false,"properties":{"c":{"type":["boolean","null"]}},"required":["c"],"type":["object","null"]}},"required":["o"],"type":"object"}`, ""},
		{`{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"string"}}}}`, "", "free-form"},
		{`{"type":"object","properties":{"a":{"oneOf":[{"type":"string"}]}}}`, "", "oneOf"},
		{`{"type":"object"}`, `{"additionalProperties":false,"properties":{},"required":[],"type":"object"}`, ""},
	} {
		got, err := StrictSchema(json.RawMessage(c.in))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("%s:\n got %s %v\nwant %s", c.in, got, err, c.want)
		}
	}
}

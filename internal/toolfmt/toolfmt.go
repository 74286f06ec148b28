// Package toolfmt writes the registry's tool definitions in the shapes
// that model APIs take in their "tools" field: OpenAI Chat Completions
// (the registry's own), OpenAI Responses, Anthropic Messages and Google
// Gemini. Each output is the value to put in that API's "tools" field as
// is, and the same bytes on every call for the same definitions, so that
// model prompt caches keep working.
package toolfmt

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/countbot/toolsvc/internal/jsonx"
	"github.com/countbot/toolsvc/internal/registry"
)

// Format names.
const (
	OpenAI    = "openai"
	Responses = "responses"
	Anthropic = "anthropic"
	Gemini    = "gemini"
)

// Formats lists every format, the default first.
func Formats() []string { return []string{OpenAI, Responses, Anthropic, Gemini} }

// Known reports whether format is one of Formats.
func Known(format string) bool {
	for _, f := range Formats() {
		if f == format {
			return true
		}
	}
	return false
}

// responsesTool is a function tool of the Responses API: flat, with strict
// false since the tools' schemas are not written for strict mode (it
// requires every property in "required" and additionalProperties false).
type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

// anthropicTool is a client tool of the Messages API.
type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// geminiTool is a Tool of the Gemini API holding function declarations.
type geminiTool struct {
	FunctionDeclarations []geminiFunction `json:"functionDeclarations"`
}

type geminiFunction struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
}

// Render returns defs in format as JSON. The openai format is what
// registry.DefinitionsJSON returns; callers serve those bytes directly.
func Render(defs []registry.Definition, format string) ([]byte, error) {
	var v any
	switch format {
	case OpenAI:
		v = defs
	case Responses:
		out := make([]responsesTool, 0, len(defs))
		for _, d := range defs {
			out = append(out, responsesTool{Type: "function", Name: d.Function.Name, Description: d.Function.Description, Parameters: d.Function.Parameters})
		}
		v = out
	case Anthropic:
		out := make([]anthropicTool, 0, len(defs))
		for _, d := range defs {
			out = append(out, anthropicTool{Name: d.Function.Name, Description: d.Function.Description, InputSchema: d.Function.Parameters})
		}
		v = out
	case Gemini:
		fns := make([]geminiFunction, 0, len(defs))
		for _, d := range defs {
			var schema map[string]any
			if err := json.Unmarshal(d.Function.Parameters, &schema); err != nil {
				return nil, fmt.Errorf("tool %s: %w", d.Function.Name, err)
			}
			fns = append(fns, geminiFunction{Name: d.Function.Name, Description: d.Function.Description, Parameters: GeminiSchema(schema)})
		}
		v = []geminiTool{{FunctionDeclarations: fns}}
	default:
		return nil, fmt.Errorf("unknown format %q: use one of %s", format, strings.Join(Formats(), ", "))
	}
	return jsonx.Marshal(v)
}

// GeminiFields are the fields of the Gemini API's Schema object, the
// subset of the OpenAPI 3.0 schema it accepts; anything else (such as
// additionalProperties, $schema, $ref, oneOf, allOf, const) is refused.
var GeminiFields = map[string]bool{
	"type": true, "format": true, "title": true, "description": true, "nullable": true,
	"enum": true, "maxItems": true, "minItems": true, "properties": true, "required": true,
	"minProperties": true, "maxProperties": true, "minLength": true, "maxLength": true,
	"pattern": true, "example": true, "anyOf": true, "propertyOrdering": true, "default": true,
	"items": true, "minimum": true, "maximum": true,
}

// GeminiTypes are the values of the Gemini Schema's type (its Type enum).
var GeminiTypes = map[string]bool{
	"STRING": true, "NUMBER": true, "INTEGER": true, "BOOLEAN": true, "ARRAY": true, "OBJECT": true, "NULL": true,
}

// geminiFormats are the formats the Gemini Schema documents, by type.
var geminiFormats = map[string]map[string]bool{
	"NUMBER":  {"float": true, "double": true},
	"INTEGER": {"int32": true, "int64": true},
	"STRING":  {"enum": true, "date-time": true},
}

// GeminiSchema returns a JSON Schema rewritten into the Gemini subset:
// fields it does not take are dropped, types are the Type enum's names, a
// ["T", "null"] type becomes T with nullable, an enum keeps only string
// values (others are named in the description). s is not changed.
func GeminiSchema(s map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range s {
		if GeminiFields[k] {
			geminiField(out, k, v)
		}
	}
	// Integer or number enums are not taken: say them in the description.
	if list, ok := s["enum"].([]any); ok && out["enum"] == nil && len(list) > 0 {
		vals, _ := json.Marshal(list)
		desc, _ := out["description"].(string)
		out["description"] = strings.TrimSpace(desc + " One of " + string(vals) + ".")
	}
	if f, ok := out["format"].(string); ok {
		t, _ := out["type"].(string)
		if !geminiFormats[t][f] {
			delete(out, "format")
		}
	}
	if enum, ok := out["enum"]; ok && enum != nil && out["type"] == "STRING" {
		out["format"] = "enum"
	}
	return out
}

// geminiField sets in out the Gemini form of the schema keyword k with
// value v, or nothing when v has no Gemini form (a type it cannot name,
// properties or items that are not schemas, an enum that is not all
// strings).
func geminiField(out map[string]any, k string, v any) {
	switch k {
	case "type":
		t, nullable := geminiType(v)
		if t == "" {
			return
		}
		out["type"] = t
		if nullable {
			out["nullable"] = true
		}
	case "properties":
		props, ok := v.(map[string]any)
		if !ok {
			return
		}
		conv := make(map[string]any, len(props))
		for name, p := range props {
			if ps, ok := p.(map[string]any); ok {
				conv[name] = GeminiSchema(ps)
			}
		}
		out["properties"] = conv
	case "items":
		if is, ok := v.(map[string]any); ok {
			out["items"] = GeminiSchema(is)
		}
	case "anyOf":
		list, ok := v.([]any)
		if !ok {
			return
		}
		var conv []any
		for _, x := range list {
			if xs, ok := x.(map[string]any); ok {
				conv = append(conv, GeminiSchema(xs))
			}
		}
		out["anyOf"] = conv
	case "enum":
		if strs, ok := geminiStringEnum(v); ok {
			out["enum"] = strs
		}
	default:
		out[k] = v
	}
}

// geminiStringEnum returns an enum's values when they are all strings
// (and there is at least one): the only enums Gemini takes.
func geminiStringEnum(v any) ([]any, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	var strs []any
	for _, x := range list {
		if str, ok := x.(string); ok {
			strs = append(strs, str)
		}
	}
	return strs, len(strs) == len(list) && len(strs) > 0
}

// geminiType maps a JSON Schema type (a name, or a list of names with
// "null") to the Type enum's name, and whether null is allowed.
func geminiType(v any) (string, bool) {
	switch t := v.(type) {
	case string:
		return strings.ToUpper(t), false
	case []any:
		name, nullable := "", false
		for _, x := range t {
			s, _ := x.(string)
			if s == "null" {
				nullable = true
			} else if name == "" {
				name = strings.ToUpper(s)
			}
		}
		if name == "" && nullable {
			return "NULL", false
		}
		return name, nullable
	}
	return "", false
}

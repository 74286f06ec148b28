package toolfmt

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/countbot/toolsvc/internal/jsonx"
	"github.com/countbot/toolsvc/internal/registry"
)

// Strict function calling (OpenAI's strict mode, "strict": true) takes a
// subset of JSON Schema, as documented at
// https://platform.openai.com/docs/guides/structured-outputs#supported-schemas:
// the root is an object (no anyOf there); every object lists all its
// properties in required and has additionalProperties false; a property a
// model may leave out is nullable instead (type ["T", "null"]), and the
// model sends null for it; and the keywords below are refused. The list is
// the one the openai SDK's own helper refuses (toStrictJsonSchema in
// openai-node's lib/transform.ts), against which the tests check the
// output.
var strictUnsupported = map[string]bool{
	"$anchor": true, "$dynamicAnchor": true, "$dynamicRef": true, "$recursiveAnchor": true, "$recursiveRef": true,
	"allOf": true, "contains": true, "contentEncoding": true, "contentMediaType": true, "contentSchema": true,
	"dependentRequired": true, "dependentSchemas": true, "dependencies": true, "else": true, "if": true,
	"maxContains": true, "maxProperties": true, "minContains": true, "minProperties": true, "not": true,
	"oneOf": true, "patternProperties": true, "prefixItems": true, "propertyNames": true, "then": true,
	"unevaluatedItems": true, "unevaluatedProperties": true, "uniqueItems": true,
}

// StrictFormats are the formats that take strict=true.
func StrictFormats() []string { return []string{OpenAI, Responses} }

// strictFunction is a Chat Completions function with its strict flag.
type strictFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

type strictDefinition struct {
	Type     string         `json:"type"`
	Function strictFunction `json:"function"`
}

// RenderStrict returns defs in format (openai or responses) for strict
// function calling: each tool whose schema can be written in the strict
// subset is, with strict true; one that cannot (a free-form object, a
// keyword strict mode refuses) keeps its schema with strict false, so the
// API takes the list either way.
func RenderStrict(defs []registry.Definition, format string) ([]byte, error) {
	type one struct {
		params json.RawMessage
		strict bool
	}
	conv := make([]one, len(defs))
	for i, d := range defs {
		p, err := StrictSchema(d.Function.Parameters)
		conv[i] = one{p, err == nil}
		if err != nil {
			conv[i].params = d.Function.Parameters
		}
	}
	switch format {
	case OpenAI:
		out := make([]strictDefinition, len(defs))
		for i, d := range defs {
			out[i] = strictDefinition{Type: "function", Function: strictFunction{d.Function.Name, d.Function.Description, conv[i].params, conv[i].strict}}
		}
		return jsonx.Marshal(out)
	case Responses:
		out := make([]responsesTool, len(defs))
		for i, d := range defs {
			out[i] = responsesTool{Type: "function", Name: d.Function.Name, Description: d.Function.Description, Parameters: conv[i].params, Strict: conv[i].strict}
		}
		return jsonx.Marshal(out)
	}
	return nil, fmt.Errorf("strict applies to the formats openai and responses, not %q", format)
}

// StrictSchema rewrites a parameters schema into the strict subset, or
// says why it cannot.
func StrictSchema(params json.RawMessage) (json.RawMessage, error) {
	var s map[string]any
	if err := json.Unmarshal(params, &s); err != nil {
		return nil, err
	}
	if s["type"] != "object" || s["anyOf"] != nil {
		return nil, fmt.Errorf("the root is not an object")
	}
	delete(s, "$schema")
	out, err := strictify(s, "")
	if err != nil {
		return nil, err
	}
	return jsonx.Marshal(out)
}

// strictify returns s in the strict subset; s is changed.
func strictify(s map[string]any, at string) (map[string]any, error) {
	for k := range s {
		if strictUnsupported[k] {
			return nil, fmt.Errorf("%s: %s is not supported in strict mode", at, k)
		}
	}
	if props, ok := s["properties"].(map[string]any); ok || s["type"] == "object" {
		if err := strictObject(s, props, at); err != nil {
			return nil, err
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		it, err := strictify(items, at+"[]")
		if err != nil {
			return nil, err
		}
		s["items"] = it
	}
	if list, ok := s["anyOf"].([]any); ok {
		for i, b := range list {
			bm, ok := b.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: an anyOf branch is no schema", at)
			}
			nb, err := strictify(bm, at)
			if err != nil {
				return nil, err
			}
			list[i] = nb
		}
	}
	return s, nil
}

// strictObject closes an object schema: every property required, the
// optional ones nullable, no other property.
func strictObject(s, props map[string]any, at string) error {
	// An object of any members (no properties, others allowed) cannot be
	// closed without losing them; the arguments object with no properties
	// is a tool without parameters, and closes.
	if ap, ok := s["additionalProperties"]; (!ok || ap != false) && len(props) == 0 && at != "" {
		return fmt.Errorf("%s: a free-form object cannot be written for strict mode", at)
	}
	if props == nil {
		props = map[string]any{}
	}
	required := map[string]bool{}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				required[name] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for name, p := range props {
		pm, ok := p.(map[string]any)
		if !ok {
			return fmt.Errorf("%s.%s: not a schema", at, name)
		}
		np, err := strictify(pm, at+"."+name)
		if err != nil {
			return err
		}
		if !required[name] {
			np = nullable(np)
		}
		props[name] = np
		names = append(names, name)
	}
	sort.Strings(names)
	req := make([]any, len(names))
	for i, n := range names {
		req[i] = n
	}
	s["type"] = "object"
	s["properties"] = props
	s["required"] = req
	s["additionalProperties"] = false
	return nil
}

// nullable returns p that also takes null: a model sends null for a
// parameter it leaves out.
func nullable(p map[string]any) map[string]any {
	switch t := p["type"].(type) {
	case string:
		if t != "null" {
			p["type"] = []any{t, "null"}
		}
	case []any:
		for _, x := range t {
			if x == "null" {
				return p
			}
		}
		p["type"] = append(t, "null")
	default:
		if list, ok := p["anyOf"].([]any); ok {
			p["anyOf"] = append(list, map[string]any{"type": "null"})
			return p
		}
		return map[string]any{"anyOf": []any{p, map[string]any{"type": "null"}}}
	}
	if list, ok := p["enum"].([]any); ok {
		p["enum"] = append(list, nil)
	}
	return p
}

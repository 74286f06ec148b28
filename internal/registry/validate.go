package registry

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/xeipuuv/gojsonschema"
)

// compileSchema checks that raw is a JSON Schema for an arguments object and
// compiles it once, at registration.
func compileSchema(raw json.RawMessage) (*gojsonschema.Schema, error) {
	var top struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("parameters are not a JSON object: %w", err)
	}
	if top.Type != "object" {
		return nil, fmt.Errorf(`parameters must have "type": "object", got %q`, top.Type)
	}
	return gojsonschema.NewSchema(gojsonschema.NewBytesLoader(raw))
}

// validate checks args against schema and returns every problem found, each
// naming the parameter path, in the schema's order.
func validate(schema *gojsonschema.Schema, args []byte) ([]string, error) {
	res, err := schema.Validate(gojsonschema.NewBytesLoader(args))
	if err != nil {
		return nil, err
	}
	if res.Valid() {
		return nil, nil
	}
	problems := make([]string, 0, len(res.Errors()))
	seen := make(map[string]bool)
	for _, e := range res.Errors() {
		p := describe(e)
		if !seen[p] {
			seen[p] = true
			problems = append(problems, p)
		}
	}
	return problems, nil
}

// describe turns one gojsonschema error into the short form a model reads:
// "start_line must be >= 1", "missing required path", "paths[0] should be string".
func describe(e gojsonschema.ResultError) string {
	field := fieldPath(e.Field())
	d := e.Details()
	switch e.Type() {
	case "required":
		return "missing required " + join(field, fmt.Sprint(d["property"]))
	case "additional_property_not_allowed":
		return "unknown parameter " + join(field, fmt.Sprint(d["property"]))
	case "invalid_type":
		return fmt.Sprintf("%s should be %s, not %s", orArgs(field), d["expected"], d["given"])
	case "enum":
		return fmt.Sprintf("%s must be one of [%s]", orArgs(field), d["allowed"])
	case "string_gte":
		return fmt.Sprintf("%s must be at least %v characters long", orArgs(field), d["min"])
	case "string_lte":
		return fmt.Sprintf("%s must be at most %v characters long", orArgs(field), d["max"])
	case "number_gte":
		return fmt.Sprintf("%s must be >= %v", orArgs(field), d["min"])
	case "number_gt":
		return fmt.Sprintf("%s must be > %v", orArgs(field), d["min"])
	case "number_lte":
		return fmt.Sprintf("%s must be <= %v", orArgs(field), d["max"])
	case "number_lt":
		return fmt.Sprintf("%s must be < %v", orArgs(field), d["max"])
	case "array_min_items":
		return fmt.Sprintf("%s must have at least %v items", orArgs(field), d["min"])
	case "array_max_items":
		return fmt.Sprintf("%s must have at most %v items", orArgs(field), d["max"])
	case "unique":
		return fmt.Sprintf("%s must not repeat items", orArgs(field))
	case "pattern":
		return fmt.Sprintf("%s must match the pattern %v", orArgs(field), d["pattern"])
	case "const":
		return fmt.Sprintf("%s must be %v", orArgs(field), d["allowed"])
	default:
		return fmt.Sprintf("%s: %s", orArgs(field), e.Description())
	}
}

// fieldPath turns gojsonschema's "(root)", "a.b" and "paths.0" into
// "", "a.b" and "paths[0]".
func fieldPath(f string) string {
	if f == "(root)" || f == "" {
		return ""
	}
	parts := strings.Split(f, ".")
	var b strings.Builder
	for i, p := range parts {
		if _, err := strconv.Atoi(p); err == nil && i > 0 {
			b.WriteString("[" + p + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

func join(parent, child string) string {
	if parent == "" {
		return child
	}
	return parent + "." + child
}

func orArgs(field string) string {
	if field == "" {
		return "arguments"
	}
	return field
}

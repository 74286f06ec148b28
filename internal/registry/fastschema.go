package registry

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// fastSchema is a parameters schema made only of the keywords the built-in
// tools declare (a single type, properties, required, additionalProperties
// as a boolean, items as one schema, minLength, maxLength, minItems,
// maxItems, an enum of strings, and an integer minimum and maximum),
// compiled to check a decoded value without the schema library, whose
// generic walk was most of what validating a small call cost.
//
// It only ever accepts. A value it cannot vouch for (one that breaks a
// keyword, or a number it would have to read as a fraction) is handed to
// the library as before, which gives the verdict and the messages: a
// call's outcome is the same either way. TestFastSchemaAgrees holds the
// two together over the tools' schemas.
type fastSchema struct {
	typ      string // object, array, string, integer, number or boolean
	props    map[string]*fastSchema
	required []string
	closed   bool // additionalProperties: false
	items    *fastSchema
	// Bounds; -1 where the schema states none.
	minLength, maxLength int
	minItems, maxItems   int
	enum                 []string // allowed strings; nil: any
	min, max             *int64
}

// compileFast returns the fast form of a parameters schema, or nil when it
// has a keyword or a value outside the fast form's (the library alone
// checks those tools).
func compileFast(params json.RawMessage) *fastSchema {
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	s, ok := compileFastNode(v)
	if !ok || s.typ != "object" {
		return nil
	}
	return s
}

func compileFastNode(v any) (*fastSchema, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	s := &fastSchema{minLength: -1, maxLength: -1, minItems: -1, maxItems: -1}
	for k, val := range m {
		if !s.keyword(k, val) {
			return nil, false
		}
	}
	if !s.consistent() {
		return nil, false
	}
	return s, true
}

// keyword reads one keyword of a schema into s, and reports whether the
// fast form has it with a value it can check.
func (s *fastSchema) keyword(k string, val any) bool {
	ok := true
	switch k {
	case "description":
		_, ok = val.(string)
	case "type":
		s.typ, ok = val.(string)
		switch s.typ {
		case "object", "array", "string", "integer", "number", "boolean":
		default:
			ok = false
		}
	case "properties":
		s.props, ok = compileProps(val)
	case "required":
		s.required, ok = stringList(val)
	case "additionalProperties":
		var allowed bool
		allowed, ok = val.(bool)
		s.closed = !allowed
	case "items":
		s.items, ok = compileFastNode(val)
	case "minLength":
		s.minLength, ok = count(val)
	case "maxLength":
		s.maxLength, ok = count(val)
	case "minItems":
		s.minItems, ok = count(val)
	case "maxItems":
		s.maxItems, ok = count(val)
	case "enum":
		s.enum, ok = stringList(val)
		ok = ok && len(s.enum) > 0
	case "minimum":
		s.min, ok = integer(val)
	case "maximum":
		s.max, ok = integer(val)
	default:
		ok = false
	}
	return ok
}

// consistent reports whether every keyword belongs to the type it is
// checked with: the library applies string keywords to strings only, and
// so on, and the fast form does not reproduce that for values of another
// type.
func (s *fastSchema) consistent() bool {
	switch {
	case s.typ == "":
		return false
	case (s.props != nil || s.required != nil || s.closed) && s.typ != "object":
		return false
	case (s.items != nil || s.minItems >= 0 || s.maxItems >= 0) && s.typ != "array":
		return false
	case (s.minLength >= 0 || s.maxLength >= 0 || s.enum != nil) && s.typ != "string":
		return false
	case (s.min != nil || s.max != nil) && s.typ != "integer" && s.typ != "number":
		return false
	}
	return true
}

// compileProps compiles the schemas of "properties".
func compileProps(v any) (map[string]*fastSchema, bool) {
	props, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	out := make(map[string]*fastSchema, len(props))
	for name, p := range props {
		sub, ok := compileFastNode(p)
		if !ok {
			return nil, false
		}
		out[name] = sub
	}
	return out, true
}

// stringList reads a list of strings ("required", "enum").
func stringList(v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		str, ok := e.(string)
		if !ok {
			return nil, false
		}
		out = append(out, str)
	}
	return out, true
}

// count reads a length or an item count: an integer literal >= 0.
func count(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(string(n))
	return i, err == nil && i >= 0
}

// integer reads a bound written as an integer literal.
func integer(v any) (*int64, bool) {
	n, ok := v.(json.Number)
	if !ok || strings.ContainsAny(string(n), ".eE") {
		return nil, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return nil, false
	}
	return &i, true
}

// accepts reports whether v, a value decoded with UseNumber, certainly
// passes the schema. False means "ask the library", not "invalid".
func (s *fastSchema) accepts(v any) bool {
	switch s.typ {
	case "object":
		return s.acceptsObject(v)
	case "array":
		return s.acceptsArray(v)
	case "string":
		return s.acceptsString(v)
	case "integer", "number":
		return s.acceptsInteger(v)
	case "boolean":
		_, ok := v.(bool)
		return ok
	}
	return false
}

func (s *fastSchema) acceptsObject(v any) bool {
	obj, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for _, name := range s.required {
		if _, ok := obj[name]; !ok {
			return false
		}
	}
	for name, val := range obj {
		p, ok := s.props[name]
		if !ok {
			if s.closed {
				return false
			}
			continue
		}
		if !p.accepts(val) {
			return false
		}
	}
	return true
}

func (s *fastSchema) acceptsArray(v any) bool {
	list, ok := v.([]any)
	if !ok || (s.minItems >= 0 && len(list) < s.minItems) || (s.maxItems >= 0 && len(list) > s.maxItems) {
		return false
	}
	if s.items != nil {
		for _, el := range list {
			if !s.items.accepts(el) {
				return false
			}
		}
	}
	return true
}

func (s *fastSchema) acceptsString(v any) bool {
	str, ok := v.(string)
	if !ok {
		return false
	}
	if s.minLength >= 0 || s.maxLength >= 0 {
		n := utf8.RuneCountInString(str)
		if (s.minLength >= 0 && n < s.minLength) || (s.maxLength >= 0 && n > s.maxLength) {
			return false
		}
	}
	return s.enum == nil || slices.Contains(s.enum, str)
}

// acceptsInteger takes integer literals only: the library reads numbers
// as exact fractions, and a fraction is left to it.
func (s *fastSchema) acceptsInteger(v any) bool {
	n, ok := v.(json.Number)
	if !ok || strings.ContainsAny(string(n), ".eE") {
		return false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return false
	}
	return (s.min == nil || i >= *s.min) && (s.max == nil || i <= *s.max)
}

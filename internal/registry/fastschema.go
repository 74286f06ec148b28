package registry

import (
	"bytes"
	"encoding/json"
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
			props, isMap := val.(map[string]any)
			ok = isMap
			s.props = make(map[string]*fastSchema, len(props))
			for name, p := range props {
				var sub *fastSchema
				if sub, ok = compileFastNode(p); !ok {
					break
				}
				s.props[name] = sub
			}
		case "required":
			list, isList := val.([]any)
			ok = isList
			for _, r := range list {
				name, isString := r.(string)
				if !isString {
					ok = false
					break
				}
				s.required = append(s.required, name)
			}
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
			list, isList := val.([]any)
			ok = isList && len(list) > 0
			for _, e := range list {
				str, isString := e.(string)
				if !isString {
					ok = false
					break
				}
				s.enum = append(s.enum, str)
			}
		case "minimum":
			s.min, ok = integer(val)
		case "maximum":
			s.max, ok = integer(val)
		default:
			ok = false
		}
		if !ok {
			return nil, false
		}
	}
	// Every keyword must belong to the type it is checked with: the
	// library applies string keywords to strings only, and so on, and the
	// fast form does not reproduce that for values of another type.
	switch {
	case s.typ == "":
		return nil, false
	case (s.props != nil || s.required != nil || s.closed) && s.typ != "object":
		return nil, false
	case (s.items != nil || s.minItems >= 0 || s.maxItems >= 0) && s.typ != "array":
		return nil, false
	case (s.minLength >= 0 || s.maxLength >= 0 || s.enum != nil) && s.typ != "string":
		return nil, false
	case (s.min != nil || s.max != nil) && s.typ != "integer" && s.typ != "number":
		return nil, false
	}
	return s, true
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
	case "array":
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
	case "string":
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
		if s.enum != nil {
			for _, e := range s.enum {
				if str == e {
					return true
				}
			}
			return false
		}
		return true
	case "integer", "number":
		// Only integer literals: the library reads numbers as exact
		// fractions, and a fraction is left to it.
		n, ok := v.(json.Number)
		if !ok || strings.ContainsAny(string(n), ".eE") {
			return false
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return false
		}
		return (s.min == nil || i >= *s.min) && (s.max == nil || i <= *s.max)
	case "boolean":
		_, ok := v.(bool)
		return ok
	}
	return false
}

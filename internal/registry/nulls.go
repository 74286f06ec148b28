package registry

import "encoding/json"

// nulls says where a null in the arguments stands for a parameter left
// out: the optional properties whose schema does not take null, at every
// level of objects and arrays. Strict function calling (OpenAI's strict
// mode) makes a model send every property, with null for the optional
// ones it leaves out; those nulls are dropped before validation, so that
// the tool sees the parameter as absent. A property that is required, or
// whose schema takes null, keeps its null.
type nulls struct {
	optional map[string]bool
	props    map[string]*nulls
	items    *nulls
}

// newNulls reads where nulls are dropped from a parameters schema; nil
// when nowhere.
func newNulls(params json.RawMessage) *nulls {
	var s map[string]any
	if json.Unmarshal(params, &s) != nil {
		return nil
	}
	return nullsOf(s)
}

func nullsOf(s map[string]any) *nulls {
	if s == nil {
		return nil
	}
	n := &nulls{}
	props, _ := s["properties"].(map[string]any)
	required := map[string]bool{}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				required[name] = true
			}
		}
	}
	for name, p := range props {
		ps, _ := p.(map[string]any)
		if !required[name] && !takesNull(ps) {
			if n.optional == nil {
				n.optional = map[string]bool{}
			}
			n.optional[name] = true
		}
		if sub := nullsOf(ps); sub != nil {
			if n.props == nil {
				n.props = map[string]*nulls{}
			}
			n.props[name] = sub
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		n.items = nullsOf(items)
	}
	if n.optional == nil && n.props == nil && n.items == nil {
		return nil
	}
	return n
}

// takesNull reports whether a schema accepts null: its type is or lists
// "null", or it has no type (anything goes, or anyOf and the like, which
// are left to the validator).
func takesNull(s map[string]any) bool {
	switch t := s["type"].(type) {
	case string:
		return t == "null"
	case []any:
		for _, x := range t {
			if x == "null" {
				return true
			}
		}
		return false
	}
	return true
}

// drop removes from v the nulls that stand for parameters left out, and
// reports whether it removed any.
func (n *nulls) drop(v any) bool {
	if n == nil {
		return false
	}
	changed := false
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if val == nil && n.optional[k] {
				delete(x, k)
				changed = true
				continue
			}
			if sub := n.props[k]; sub != nil && sub.drop(val) {
				changed = true
			}
		}
	case []any:
		for _, el := range x {
			if n.items.drop(el) {
				changed = true
			}
		}
	}
	return changed
}

package registry

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strings"

	"github.com/countbot/toolsvc/internal/runes"
)

// Rule is a constraint between parameters, which the JSON Schema of a tool
// does not state (models are given plain schemas, without oneOf or
// dependencies). The registry checks a tool's rules after its schema,
// reports their problems together with the schema's and in the same form,
// and states them at the end of the tool's description, so that the model
// is told the rules it is held to.
type Rule struct {
	text  string
	first string // for ExactlyOne: the parameter an example shows
	check func(args map[string]any) []problem
}

// String is the rule as the description states it.
func (r Rule) String() string { return r.text }

// Ruled is implemented by tools whose parameters depend on each other.
type Ruled interface {
	Rules() []Rule
}

// ExactlyOne requires exactly one of two parameters, such as path (one
// file) and paths (several).
func ExactlyOne(a, b string) Rule {
	return Rule{
		text:  fmt.Sprintf("Give exactly one of %s and %s.", a, b),
		first: a,
		check: func(args map[string]any) []problem {
			ga, gb := given(args, a), given(args, b)
			switch {
			case !ga && !gb:
				return []problem{{a, fmt.Sprintf("missing required %s or %s (exactly one of them)", a, b)}}
			case ga && gb:
				return []problem{{a, fmt.Sprintf("%s and %s must not both be given (exactly one of them)", a, b)}}
			}
			return nil
		},
	}
}

// NotAfter requires first <= last when both numbers are given, such as
// start_line and end_line.
func NotAfter(first, last string) Rule {
	return Rule{
		text: fmt.Sprintf("%s must not be greater than %s.", first, last),
		check: func(args map[string]any) []problem {
			x, okx := number(args[first])
			y, oky := number(args[last])
			if okx && oky && x.Cmp(y) > 0 {
				return []problem{{first, fmt.Sprintf("%s must be <= %s, but %s > %s", first, last, runes.Shorten(args[first].(json.Number).String(), 40), runes.Shorten(args[last].(json.Number).String(), 40))}}
			}
			return nil
		},
	}
}

// RequiredWhen requires needed, not blank, when field has the string value
// value, such as content when memory's action is write.
func RequiredWhen(field, value, needed string) Rule {
	return Rule{
		text: fmt.Sprintf("%s=%s requires %s.", field, value, needed),
		check: func(args map[string]any) []problem {
			if v, _ := args[field].(string); v != value {
				return nil
			}
			why := fmt.Sprintf("(%s=%s needs %s)", field, value, needed)
			if !given(args, needed) {
				return []problem{{needed, fmt.Sprintf("missing required %s %s", needed, why)}}
			}
			if s, ok := args[needed].(string); ok && strings.TrimSpace(s) == "" {
				return []problem{{needed, fmt.Sprintf("%s must not be blank %s", needed, why)}}
			}
			return nil
		},
	}
}

// given reports whether a parameter is present and not null.
func given(args map[string]any, name string) bool {
	v, ok := args[name]
	return ok && v != nil
}

func number(v any) (*big.Rat, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	return new(big.Rat).SetString(string(n))
}

// describeRules is what Register appends to a tool's description.
func describeRules(rules []Rule) string {
	texts := make([]string, len(rules))
	for i, r := range rules {
		texts[i] = r.text
	}
	return strings.Join(texts, " ")
}

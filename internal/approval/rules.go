package approval

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Kind is what a rule asks of a call.
type Kind uint8

const (
	// Never: the call runs without asking (also a rule's zero value).
	Never Kind = iota
	// Always: every call waits for a person.
	Always
	// Destructive: a call waits when the tool says it may change or
	// delete what exists (its destructive hint).
	Destructive
	// Matching: a call waits when its arguments match one of the rule's
	// patterns.
	Matching
)

// Rule is one tool's (or one glob's) approval rule.
type Rule struct {
	Kind Kind
	// Patterns, for Matching: the call waits when all the arguments one
	// pattern names match it.
	Patterns []Pattern
}

// Pattern maps argument names to globs: "*" stands for any run of
// characters ("/" and spaces included), "?" for one. A string argument is
// matched as it is and, for a path-like value, also cleaned ("./deploy/x"
// and "a/../deploy/x" are "deploy/x"); a command's runs of spaces count
// as one. Any other value is matched by its JSON text.
type Pattern map[string]string

// ParseRule reads a rule as YAML or JSON gives it: "always", "never",
// "destructive", or a list of patterns (objects of argument name to glob).
func ParseRule(v any) (Rule, error) {
	switch v := v.(type) {
	case string:
		switch v {
		case "always":
			return Rule{Kind: Always}, nil
		case "never":
			return Rule{Kind: Never}, nil
		case "destructive":
			return Rule{Kind: Destructive}, nil
		}
		return Rule{}, fmt.Errorf("%q is no approval rule: use always, never, destructive or a list of argument patterns such as [{command: \"git push*\"}]", v)
	case bool:
		if v {
			return Rule{Kind: Always}, nil
		}
		return Rule{Kind: Never}, nil
	case []any:
		r := Rule{Kind: Matching}
		for i, item := range v {
			m, ok := item.(map[string]any)
			if !ok || len(m) == 0 {
				return Rule{}, fmt.Errorf("pattern %d: want an object of argument name to glob, such as {path: \"deploy/*\"}", i+1)
			}
			p := Pattern{}
			for name, g := range m {
				s, ok := g.(string)
				if !ok || s == "" {
					return Rule{}, fmt.Errorf("pattern %d: the glob of %s must be a non-empty string", i+1, name)
				}
				p[name] = s
			}
			r.Patterns = append(r.Patterns, p)
		}
		if len(r.Patterns) == 0 {
			return Rule{}, errors.New("an empty list of patterns holds no call: use never")
		}
		return r, nil
	}
	return Rule{}, errors.New("an approval rule is always, never, destructive or a list of argument patterns")
}

// Holds reports whether a call with these arguments (a JSON object, the
// checked arguments) must wait, under r, for a tool whose destructive hint
// is destructive.
func (r Rule) Holds(destructive bool, args []byte) bool {
	switch r.Kind {
	case Always:
		return true
	case Destructive:
		return destructive
	case Matching:
		var m map[string]json.RawMessage
		if json.Unmarshal(args, &m) != nil {
			return true // unreadable arguments are not waved through
		}
		for _, p := range r.Patterns {
			if p.matches(m) {
				return true
			}
		}
	}
	return false
}

func (p Pattern) matches(args map[string]json.RawMessage) bool {
	for name, glob := range p {
		raw, ok := args[name]
		if !ok {
			return false
		}
		if !slices.ContainsFunc(forms(raw), func(s string) bool { return Glob(glob, s) }) {
			return false
		}
	}
	return true
}

// forms are the texts a pattern is matched against: a string as it is,
// with runs of white space made one space, and cleaned as a path; any
// other value as its JSON text.
func forms(raw json.RawMessage) []string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return []string{string(raw)}
	}
	out := []string{s, strings.Join(strings.Fields(s), " ")}
	if s != "" {
		c := path.Clean(strings.ReplaceAll(s, `\`, "/"))
		out = append(out, c, strings.TrimPrefix(c, "/"))
	}
	return out
}

// Glob reports whether s matches pattern: "*" any run of characters, "?"
// one character, anything else itself.
func Glob(pattern, s string) bool {
	px, sx := 0, 0
	starP, starS := -1, 0
	pr, sr := []rune(pattern), []rune(s)
	for sx < len(sr) {
		switch {
		case px < len(pr) && (pr[px] == '?' || pr[px] == sr[sx]):
			px++
			sx++
		case px < len(pr) && pr[px] == '*':
			starP, starS = px, sx
			px++
		case starP >= 0:
			px = starP + 1
			starS++
			sx = starS
		default:
			return false
		}
	}
	for px < len(pr) && pr[px] == '*' {
		px++
	}
	return px == len(pr)
}

// Rules are the approval rules of one key, in order: the first entry
// whose Match takes a tool's name gives its rule. The policy file puts a
// key's own entries first, then the default's, then the file's top-level
// ones, and within each exact names before globs.
type Rules struct {
	entries []Entry
}

// Entry is one name, toolset or glob of an approval map with its rule.
type Entry struct {
	// Name is as the file wrote it, for messages.
	Name  string
	Match func(tool string) bool
	Rule  Rule
}

// NewRules returns rules of the entries, the first matching one winning.
func NewRules(entries ...Entry) Rules { return Rules{entries: entries} }

// For returns the rule for the tool named tool, and whether one is given.
func (r Rules) For(tool string) (Rule, bool) {
	for _, e := range r.entries {
		if e.Match(tool) {
			return e.Rule, true
		}
	}
	return Rule{}, false
}

// Empty reports whether no rule is given.
func (r Rules) Empty() bool { return len(r.entries) == 0 }

// Holds reports whether any entry's rule can hold a call (is not never).
func (r Rules) Holds() bool {
	for _, e := range r.entries {
		if e.Rule.Kind != Never {
			return true
		}
	}
	return false
}

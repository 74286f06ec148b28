package customtools

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/countbot/toolsvc/internal/approval"
)

// parseApproval reads an entry's approval rule: always, never,
// destructive (the tool's destructiveHint decides, and a tools file's
// tool is destructive unless its annotations say otherwise), or a list of
// argument patterns such as [{path: "deploy/*"}]. None given: nil, and
// only the policy file's rules can hold the tool's calls.
//
// A pattern that names an argument the tool's parameters do not have
// would never match, so the calls it was written to hold would run
// without asking: it is refused, unless the schema lets a call carry
// arguments it does not list (additionalProperties or patternProperties
// given and not false).
func parseApproval(v any, params json.RawMessage) (*approval.Rule, error) {
	if v == nil {
		return nil, nil
	}
	r, err := approval.ParseRule(v)
	if err != nil {
		return nil, fmt.Errorf("approval: %v", err)
	}
	if r.Kind == approval.Matching {
		if err := checkPatternArgs(r, params); err != nil {
			return nil, err
		}
	}
	return &r, nil
}

// checkPatternArgs refuses a pattern naming an argument the schema
// params does not declare, when the schema declares every argument.
func checkPatternArgs(r approval.Rule, params json.RawMessage) error {
	var top struct {
		Properties           map[string]json.RawMessage `json:"properties"`
		AdditionalProperties json.RawMessage            `json:"additionalProperties"`
		PatternProperties    json.RawMessage            `json:"patternProperties"`
	}
	_ = json.Unmarshal(params, &top) // compiled already
	open := func(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "false" }
	if open(top.AdditionalProperties) || open(top.PatternProperties) {
		return nil
	}
	known := make([]string, 0, len(top.Properties))
	for p := range top.Properties {
		known = append(known, p)
	}
	slices.Sort(known)
	for i, p := range r.Patterns {
		names := make([]string, 0, len(p))
		for n := range p {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			if _, ok := top.Properties[n]; ok {
				continue
			}
			have := "it takes no arguments"
			if len(known) > 0 {
				have = "its arguments are " + strings.Join(known, ", ")
			}
			return fmt.Errorf("approval: pattern %d names the argument %q, which the tool's parameters do not have (%s), so it would never hold a call", i+1, n, have)
		}
	}
	return nil
}

// ApprovalRule is the tool's own approval rule from its entry
// (approval.Ruled); false when the entry gives none. The policy file's
// rules for the tool come first.
func (c *Command) ApprovalRule() (approval.Rule, bool) { return ruleOf(c.spec) }

// ApprovalRule is the tool's own approval rule from its entry
// (approval.Ruled); false when the entry gives none. The policy file's
// rules for the tool come first.
func (h *HTTP) ApprovalRule() (approval.Rule, bool) { return ruleOf(h.spec) }

func ruleOf(s Spec) (approval.Rule, bool) {
	if s.Approval == nil {
		return approval.Rule{}, false
	}
	return *s.Approval, true
}

var (
	_ approval.Ruled = (*Command)(nil)
	_ approval.Ruled = (*HTTP)(nil)
)

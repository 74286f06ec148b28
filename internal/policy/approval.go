package policy

import (
	"slices"
	"strings"

	"github.com/countbot/toolsvc/internal/approval"
)

// approvalMap is an approval map as written: tool names, toolsets, MCP
// servers or globs, each with a rule (always, never, destructive, or a
// list of argument patterns).
type approvalMap map[string]any

// approvals compiles the approval maps of one key, in the order they
// decide: the key's own entry, the default's, the file's top level. Within
// a map, exact tool names come first, then toolsets and servers, then
// globs, longer before shorter.
func (c *compiler) approvals(maps ...approvalAt) approval.Rules {
	var entries []approval.Entry
	for _, m := range maps {
		names := make([]string, 0, len(m.m))
		for n := range m.m {
			names = append(names, n)
		}
		slices.SortFunc(names, func(a, b string) int {
			if ra, rb := specificity(a), specificity(b); ra != rb {
				return ra - rb
			}
			if len(a) != len(b) {
				return len(b) - len(a)
			}
			return strings.Compare(a, b)
		})
		for _, n := range names {
			where := "approval." + n
			if m.at != "" {
				where = m.at + "." + where
			}
			r, err := approval.ParseRule(plain(m.m[n]))
			if err != nil {
				c.fail(where, "%v", err)
				continue
			}
			set := c.set(where, []string{n})
			entries = append(entries, approval.Entry{Name: n, Match: set.has, Rule: r})
		}
	}
	return approval.NewRules(entries...)
}

// approvalAt is one approval map and where it is in the file.
type approvalAt struct {
	at string
	m  approvalMap
}

// specificity orders the names of one map: a glob after a name.
func specificity(n string) int {
	if strings.ContainsAny(n, `*?[\`) {
		return 1
	}
	return 0
}

// Approval returns the approval rules of the key named key and whether it
// may approve its own calls.
func (p *Policy) Approval(key string) (approval.Rules, bool) {
	r := p.rule(key)
	return r.approval, r.selfApprove
}

// Approval returns the approval rules of the key named key under the
// policy in force, and whether it may approve its own calls; none
// without a policy.
func (e *Enforcer) Approval(key string) (approval.Rules, bool) {
	p := e.cur.Load()
	if p == nil {
		return approval.Rules{}, false
	}
	return p.Approval(key)
}

// plain is v with the maps YAML decoded inside an approvalMap (which takes
// that type for every nested map) made plain maps again.
func plain(v any) any {
	switch v := v.(type) {
	case approvalMap:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = plain(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = plain(x)
		}
		return out
	}
	return v
}

// HoldsAny reports whether the policy in force holds any call for a
// person: some key's rules (or the default's) name a tool with a rule
// other than never.
func (e *Enforcer) HoldsAny() bool {
	p := e.cur.Load()
	if p == nil {
		return false
	}
	if p.def.approval.Holds() {
		return true
	}
	for _, r := range p.keys {
		if r.approval.Holds() {
			return true
		}
	}
	return false
}

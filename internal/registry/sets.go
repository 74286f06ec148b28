package registry

import (
	"encoding/json"
	"fmt"
	"sort"
)

// ReplaceSet replaces every tool of the named set with tools, at once: a
// caller sees either the old set or the new one, never a mix. Calls that
// already started finish on the tool they started with. Nothing changes
// when it fails: on an invalid name or schema, on two tools of the same
// name, or on a name held by a tool outside the set (a built-in one or
// one of another set); the error names both. An empty tools removes the
// set. set must not be empty ("" holds Register's tools).
func (r *Registry) ReplaceSet(set string, tools []Tool) error {
	if set == "" {
		return fmt.Errorf("replace tools: the set needs a name")
	}
	entries := make(map[string]*entry, len(tools))
	for _, t := range tools {
		e, err := newEntry(t, set)
		if err != nil {
			return err
		}
		if _, dup := entries[t.Name()]; dup {
			return fmt.Errorf("register tool %q: two tools of %s have that name", t.Name(), set)
		}
		entries[t.Name()] = e
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for name := range entries {
		if old, ok := r.tools[name]; ok && old.set != set {
			return fmt.Errorf("register tool %q: the tool of %s clashes with %s of that name", name, set, owner(old.set))
		}
	}
	for name, e := range r.tools {
		if e.set == set {
			delete(r.tools, name)
		}
	}
	for name, e := range entries {
		r.tools[name] = e
	}
	r.changedLocked()
	return nil
}

// owner names who holds a tool, for a clash error.
func owner(set string) string {
	if set == "" {
		return "the built-in tool"
	}
	return "the tool of " + set
}

// Set returns the names of the tools of the named set, sorted.
func (r *Registry) Set(set string) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var names []string
	for n, e := range r.tools {
		if e.set == set {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Generation counts the changes of the set of tools and of the Policy in
// force: it is the same as long as the tools, their definitions and what
// each key may see are, so that what is rendered from them (formats,
// documents) can be cached per generation.
func (r *Registry) Generation() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.genLocked()
}

// genLocked is Generation with r.mu held: the sum of two counters that
// only grow, so it changes when either does.
func (r *Registry) genLocked() uint64 {
	if r.opts.Policy != nil {
		return r.gen + r.opts.Policy.Generation()
	}
	return r.gen
}

// Snapshot returns the generation and the definitions of that generation,
// sorted by name, read together.
func (r *Registry) Snapshot() (gen uint64, defs []Definition) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	defs = make([]Definition, 0, len(r.tools))
	for _, n := range r.namesLocked() {
		defs = append(defs, r.tools[n].def)
	}
	return r.genLocked(), defs
}

func (r *Registry) changedLocked() {
	r.allDefs = nil
	r.gen++
}

// CheckSchema reports whether raw is a parameters schema Register accepts:
// a JSON Schema with "type": "object" that compiles. Tools that come from
// outside (a tools file, MCP servers) are checked with it first, so that
// the entry at fault is named, or one bad schema leaves that tool out.
func CheckSchema(raw json.RawMessage) error {
	_, err := compileSchema(raw)
	return err
}

// ValidName reports whether name is a valid tool name (NamePattern).
func ValidName(name string) bool { return namePattern().MatchString(name) }

// NamePattern is the rule tool names follow, valid for every model's
// tool format.
const NamePattern = `^[a-zA-Z0-9_-]{1,64}$`

// Package policy decides, per API key name, what a caller may do: which
// tools it may call (and so see), how often (a token bucket per key), how
// many of its calls may run at once, and the bounds of its sub-agents
// (how many run at once, how many turns each may take). It reads TOOLSVC_POLICY_FILE,
// checks every name in it against the service's keys, tools, toolsets and
// MCP servers, and answers the registry's questions for each call without
// allocating. It knows nothing of HTTP or of any tool.
package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/countbot/toolsvc/internal/approval"
	"github.com/countbot/toolsvc/internal/config"
)

// Names are what a policy file may name, as the service has them at
// start-up (and at each reload).
type Names struct {
	// Keys are the names of the API keys and admin keys.
	Keys []string
	// Tools are the names of every tool the service knows, on or off.
	Tools []string
	// Toolsets are the toolsets by name (the built-in ones and the tools
	// file's), each with its tools' names.
	Toolsets map[string][]string
	// Servers are the names of the tools file's MCP servers, whose tools
	// are named <server>__<tool>.
	Servers []string
	// NoFolders, when set, says why no key may have a folder of its own
	// here (a command could reach every folder): a workspace entry is
	// then refused with it.
	NoFolders string
}

// Policy is a policy file compiled: a rule per key named in it and the
// default for the others. It never changes once built.
type Policy struct {
	def  rule
	keys map[string]*rule
	// folders maps each key that has a folder of its own to it, with
	// "{key}" expanded (every key the service has, named in the file or
	// served by the default): the keys are known when the file is read.
	folders map[string]string
}

// rule is what one key may do.
type rule struct {
	// tools decides the tools; nil: every tool.
	tools *matcher
	// perSecond is the bucket's refill rate and burst its size; perSecond
	// 0: no rate.
	perSecond, burst float64
	// maxConcurrent bounds the key's calls at once; 0: no bound.
	maxConcurrent int64
	// subMaxRunning bounds the key's sub-agent tasks running at once and
	// subMaxTurns the turns of each; 0: only the service's bounds.
	subMaxRunning, subMaxTurns int
	// approval holds the key's calls for a person: its own map, the
	// default's, then the file's top-level one.
	approval approval.Rules
	// selfApprove lets the key decide approvals of its own calls.
	selfApprove bool
}

// entryFile is one entry of the file as written.
type entryFile struct {
	Tools         *toolsFile     `yaml:"tools"`
	Rate          *rateFile      `yaml:"rate"`
	MaxConcurrent *int           `yaml:"max_concurrent"`
	Subagents     *subagentsFile `yaml:"subagents"`
	// Workspace is the key's own folder, relative to the service's
	// workspace; "{key}" stands for the key's name, "." for the whole
	// workspace.
	Workspace *string `yaml:"workspace"`
	// Approval holds the key's calls for a person's approval, by tool;
	// it comes before the default's map and the file's top-level one.
	Approval approvalMap `yaml:"approval"`
	// SelfApprove lets the key approve its own held calls (when it may
	// approve at all).
	SelfApprove *bool `yaml:"self_approve"`
}

// subagentsFile bounds a key's sub-agents; a field left out takes the
// default's, as the entry's own fields do.
type subagentsFile struct {
	MaxRunning *int `yaml:"max_running"`
	MaxTurns   *int `yaml:"max_turns"`
}

type toolsFile struct {
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
}

type rateFile struct {
	PerMinute float64 `yaml:"per_minute"`
	Burst     int     `yaml:"burst"`
}

type fileDoc struct {
	Default *entryFile           `yaml:"default"`
	Keys    map[string]entryFile `yaml:"keys"`
	// Approval is the approval map for every key.
	Approval approvalMap `yaml:"approval"`
}

// Load reads and compiles the policy file at path; see Parse.
func Load(file string, names Names) (*Policy, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	p, err := Parse(data, names)
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", file, err)
	}
	return p, nil
}

// Parse compiles a policy file's text (YAML, or JSON, which YAML reads).
// Every mistake is reported, each with where it is: an unknown field, a
// planned field that is not built yet, a key, tool, toolset or MCP server
// the service does not have (with the nearest name it has), a rate or a
// bound that makes no sense. A key's entry takes from the default each
// field it does not set.
func Parse(data []byte, names Names) (*Policy, error) {
	var doc fileDoc
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	c := compiler{names: names}
	c.index()
	p := &Policy{keys: map[string]*rule{}}
	var def entryFile
	if doc.Default != nil {
		def = *doc.Default
	}
	top := approvalAt{at: "", m: doc.Approval}
	p.def = c.rule("default", def)
	p.def.approval = c.approvals(approvalAt{"default", def.Approval}, top)
	keyNames := make([]string, 0, len(doc.Keys))
	for k := range doc.Keys {
		keyNames = append(keyNames, k)
	}
	slices.Sort(keyNames)
	for _, k := range keyNames {
		at := "keys." + k
		if !slices.Contains(names.Keys, k) {
			c.fail(at, "%s", unknown("no key is named", k, names.Keys, "TOOLSVC_API_KEYS and TOOLSVC_ADMIN_KEYS name "+listOrNone(names.Keys)))
			continue
		}
		r := c.rule(at, merge(def, doc.Keys[k]))
		r.approval = c.approvals(approvalAt{at, doc.Keys[k].Approval}, approvalAt{"default", def.Approval}, top)
		p.keys[k] = &r
	}
	p.folders = c.folders(def, doc.Keys)
	if len(c.errs) > 0 {
		// The top-level approval map is compiled for every key: its
		// mistakes are told once.
		slices.Sort(c.errs)
		return nil, errors.New(strings.Join(slices.Compact(c.errs), "; "))
	}
	return p, nil
}

// merge is e with the fields it leaves out taken from def.
func merge(def, e entryFile) entryFile {
	if e.Tools == nil {
		e.Tools = def.Tools
	}
	if e.Rate == nil {
		e.Rate = def.Rate
	}
	if e.MaxConcurrent == nil {
		e.MaxConcurrent = def.MaxConcurrent
	}
	if e.Workspace == nil {
		e.Workspace = def.Workspace
	}
	if e.SelfApprove == nil {
		e.SelfApprove = def.SelfApprove
	}
	switch {
	case e.Subagents == nil:
		e.Subagents = def.Subagents
	case def.Subagents != nil:
		// Field by field: a key that sets only max_turns keeps the
		// default's max_running.
		s := *e.Subagents
		if s.MaxRunning == nil {
			s.MaxRunning = def.Subagents.MaxRunning
		}
		if s.MaxTurns == nil {
			s.MaxTurns = def.Subagents.MaxTurns
		}
		e.Subagents = &s
	}
	return e
}

// compiler turns entries into rules, collecting every mistake.
type compiler struct {
	names Names
	known []string // tools, toolsets and servers: the "did you mean" candidates
	errs  []string
}

func (c *compiler) index() {
	c.known = append(c.known, c.names.Tools...)
	for n := range c.names.Toolsets {
		c.known = append(c.known, n)
	}
	c.known = append(c.known, c.names.Servers...)
	slices.Sort(c.known)
	c.known = slices.Compact(c.known)
}

func (c *compiler) fail(at, format string, args ...any) {
	c.errs = append(c.errs, at+": "+fmt.Sprintf(format, args...))
}

func (c *compiler) rule(at string, e entryFile) rule {
	var r rule
	if e.Tools != nil {
		r.tools = &matcher{allow: c.set(at+".tools.allow", e.Tools.Allow), deny: c.set(at+".tools.deny", e.Tools.Deny)}
		if e.Tools.Allow == nil {
			r.tools.allow = nil // no allow list: every tool but those denied
		}
	}
	if e.Rate != nil {
		switch {
		case !(e.Rate.PerMinute > 0) || math.IsInf(e.Rate.PerMinute, 0):
			c.fail(at+".rate.per_minute", "must be a number of calls greater than zero")
		case e.Rate.Burst < 1:
			c.fail(at+".rate.burst", "must be 1 or more: the calls a key may make at once before the rate holds it back")
		default:
			r.perSecond, r.burst = e.Rate.PerMinute/60, float64(e.Rate.Burst)
		}
	}
	if e.MaxConcurrent != nil {
		if *e.MaxConcurrent < 1 {
			c.fail(at+".max_concurrent", "must be 1 or more (leave it out for no bound)")
		}
		r.maxConcurrent = int64(*e.MaxConcurrent)
	}
	r.selfApprove = e.SelfApprove != nil && *e.SelfApprove
	if e.Subagents != nil {
		r.subMaxRunning = c.positive(at+".subagents.max_running", e.Subagents.MaxRunning, "sub-agents of the key running at once")
		r.subMaxTurns = c.positive(at+".subagents.max_turns", e.Subagents.MaxTurns, "turns of each of the key's sub-agents")
	}
	return r
}

// positive is n, which must be 1 or more when set; 0 when left out (no
// bound of the key's own).
func (c *compiler) positive(at string, n *int, what string) int {
	if n == nil {
		return 0
	}
	if *n < 1 {
		c.fail(at, "must be 1 or more: the %s (leave it out for the service's bound alone)", what)
		return 0
	}
	return *n
}

// set compiles a list of patterns: tool names, toolset names, MCP server
// names (all their tools) and globs (path.Match) over tool names, such as
// files__* for the tools of the MCP server files.
func (c *compiler) set(at string, patterns []string) *nameSet {
	s := &nameSet{names: map[string]struct{}{}}
	for _, p := range patterns {
		if strings.ContainsAny(p, `*?[\`) {
			c.glob(at, p, s)
			continue
		}
		found := false
		if slices.Contains(c.names.Tools, p) {
			s.names[p], found = struct{}{}, true
		}
		if tools, ok := c.names.Toolsets[p]; ok {
			for _, t := range tools {
				s.names[t] = struct{}{}
			}
			found = true
		}
		if slices.Contains(c.names.Servers, p) {
			s.prefixes, found = append(s.prefixes, p+"__"), true
		}
		if srv, _, ok := strings.Cut(p, "__"); !found && ok && slices.Contains(c.names.Servers, srv) {
			// A tool of an MCP server named before the server has listed
			// its tools: servers start in the background, so it may not
			// be known when the file is read. It is taken as written.
			s.names[p], found = struct{}{}, true
		}
		if !found {
			c.fail(at, "%s", unknown("no tool, toolset or MCP server is named", p, c.known, "toolsets: "+c.toolsetList()))
		}
	}
	return s
}

// glob adds a glob to s, once it has checked it: well formed, and naming
// a known MCP server (server__*) or matching a known tool.
func (c *compiler) glob(at, p string, s *nameSet) {
	if _, err := path.Match(p, ""); err != nil {
		c.fail(at, "%q is not a valid pattern (%v)", p, err)
		return
	}
	if srv, _, ok := strings.Cut(p, "__"); ok && !strings.ContainsAny(srv, `*?[\`) {
		if !slices.Contains(c.names.Servers, srv) {
			c.fail(at, "%s", unknown("no MCP server is named", srv, c.names.Servers, "the tools file's MCP servers: "+listOrNone(c.names.Servers)))
			return
		}
		s.globs = append(s.globs, p)
		return
	}
	for _, t := range c.names.Tools {
		if ok, _ := path.Match(p, t); ok {
			s.globs = append(s.globs, p)
			return
		}
	}
	c.fail(at, "%q matches no tool (tools: %s)", p, listOrNone(c.names.Tools))
}

func (c *compiler) toolsetList() string {
	sets := make([]string, 0, len(c.names.Toolsets))
	for n := range c.names.Toolsets {
		sets = append(sets, n)
	}
	slices.Sort(sets)
	return listOrNone(sets)
}

// unknown says that name is not known, with the nearest known one, as the
// tool switches say it.
func unknown(what, name string, known []string, list string) string {
	msg := fmt.Sprintf("%s %q", what, name)
	if near := config.Nearest(name, known); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	return msg + " (" + list + ")"
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// matcher decides a key's tools: denied ones never, else allowed ones
// (every tool when allow is nil).
type matcher struct {
	allow, deny *nameSet
}

func (m *matcher) allows(tool string) bool {
	if m.deny.has(tool) {
		return false
	}
	return m.allow == nil || m.allow.has(tool)
}

// nameSet is tool names, prefixes (an MCP server's tools) and globs.
type nameSet struct {
	names    map[string]struct{}
	prefixes []string
	globs    []string
}

func (s *nameSet) has(tool string) bool {
	if _, ok := s.names[tool]; ok {
		return true
	}
	for _, p := range s.prefixes {
		if strings.HasPrefix(tool, p) {
			return true
		}
	}
	for _, g := range s.globs {
		if ok, _ := path.Match(g, tool); ok {
			return true
		}
	}
	return false
}

// rule returns the rule of key: its own, or the default.
func (p *Policy) rule(key string) *rule {
	if r, ok := p.keys[key]; ok {
		return r
	}
	return &p.def
}

// Allows reports whether the key named key may call (and see) tool.
func (p *Policy) Allows(key, tool string) bool {
	r := p.rule(key)
	return r.tools == nil || r.tools.allows(tool)
}

// SeesAll reports whether the key named key may call every tool.
func (p *Policy) SeesAll(key string) bool { return p.rule(key).tools == nil }

// Subagents returns the bounds of the key's sub-agents: how many may run
// at once and how many turns each may take; 0: no bound of the key's own.
func (p *Policy) Subagents(key string) (maxRunning, maxTurns int) {
	r := p.rule(key)
	return r.subMaxRunning, r.subMaxTurns
}

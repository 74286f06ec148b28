package app

import (
	"fmt"
	"slices"
	"strings"

	"github.com/countbot/toolsvc/internal/config"
	"github.com/countbot/toolsvc/internal/registry"
)

// Toolset names. TOOLSVC_TOOLS_ENABLED and TOOLSVC_TOOLS_DISABLED take
// them beside tool names.
const (
	Files    = "files"    // read_file, write_file, edit_file, list_dir, file_search
	Shell    = "shell"    // exec
	Web      = "web"      // web_fetch, screenshot
	Memory   = "memory"   // memory
	Agents   = "agents"   // spawn, workflow_run, send_message
	Channels = "channels" // send_media
)

// Toolset is a named group of tools.
type Toolset struct {
	Name  string
	Tools []string
}

// toolDef is one tool: its name, how it is built from the service's
// parts, and which of the service's own agents may use it. build returns
// the tool and a note for the start-up log, or no tool and the reason it
// is off here (a dependency missing), or an error that stops start-up (a
// setting that cannot work). The built tool's Name must be name.
type toolDef struct {
	name   string
	build  func(b *builder) (t registry.Tool, note string, err error)
	agents agentUse
}

// agentUse says which of the service's own agents may call a tool, besides
// the service's callers. Every row states it, so that a new tool reaches
// an agent only when its row says so.
type agentUse int

const (
	// callersOnly: no agent of the service; for the tools that start
	// agents, and those that reach the user's chat channels.
	callersOnly agentUse = iota
	// conversationAgent: also the voice-device conversation agent, which
	// talks with the user (send_message), but not sub-agents, which work
	// alone (screenshot: a sub-agent could not look at the picture).
	conversationAgent
	// allAgents: also the sub-agents of spawn and workflow_run.
	allAgents
)

type toolsetDef struct {
	name  string
	tools []toolDef
}

// toolsets is every tool of the service, by toolset, in the order they are
// built. A new tool is a file in internal/tools (its arguments struct, and
// a constructor that declares the name, description, limits, sample,
// title and hints with tooldef.New) and a row here: the name, how to
// build it (a builder method, which may leave the tool off when a
// dependency is missing) and which agents may use it. The tests of this
// package build every row and check each tool's schema against its
// arguments struct, and its title and hints.
func toolsets() []toolsetDef {
	return []toolsetDef{
		{Files, []toolDef{
			{"read_file", (*builder).readFile, allAgents},
			{"write_file", (*builder).writeFile, allAgents},
			{"edit_file", (*builder).editFile, allAgents},
			{"list_dir", (*builder).listDir, allAgents},
			{"file_search", (*builder).fileSearch, allAgents},
		}},
		{Shell, []toolDef{{"exec", (*builder).exec, allAgents}}},
		{Web, []toolDef{
			{"web_fetch", (*builder).webFetch, allAgents},
			{"screenshot", (*builder).screenshot, conversationAgent},
		}},
		{Memory, []toolDef{{"memory", (*builder).memory, allAgents}}},
		{Agents, []toolDef{
			{"spawn", (*builder).spawn, callersOnly},
			{"workflow_run", (*builder).workflowRun, callersOnly},
			{"send_message", (*builder).sendMessage, callersOnly},
		}},
		{Channels, []toolDef{{"send_media", (*builder).sendMedia, callersOnly}}},
	}
}

// Toolsets returns every toolset with the names of its tools.
func Toolsets() []Toolset {
	var out []Toolset
	for _, s := range toolsets() {
		ts := Toolset{Name: s.name}
		for _, t := range s.tools {
			ts.Tools = append(ts.Tools, t.name)
		}
		out = append(out, ts)
	}
	return out
}

// Resolve turns tool and toolset names into the names of the tools they
// stand for, each once, in build order. An unknown name is an error that
// names the nearest known one.
func Resolve(names []string) ([]string, error) {
	return resolveIn(Toolsets(), names)
}

// resolveIn is Resolve over the given toolsets.
func resolveIn(sets []Toolset, names []string) ([]string, error) {
	var known []string
	for _, s := range sets {
		known = append(known, s.Name)
		known = append(known, s.Tools...)
	}
	want := map[string]bool{}
	var errs []string
	for _, n := range names {
		found := false
		for _, s := range sets {
			if n == s.Name {
				found = true
				for _, t := range s.Tools {
					want[t] = true
				}
			} else if slices.Contains(s.Tools, n) {
				found = true
				want[n] = true
			}
		}
		if !found {
			msg := fmt.Sprintf("%q is neither a tool nor a toolset", n)
			if near := config.Nearest(n, known); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			errs = append(errs, msg)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s (toolsets: %s)", strings.Join(errs, "; "), toolsetList(sets))
	}
	var out []string
	for _, s := range sets {
		for _, t := range s.Tools {
			if want[t] {
				out = append(out, t)
			}
		}
	}
	return out, nil
}

func toolsetList(sets []Toolset) string {
	var parts []string
	for _, s := range sets {
		if len(s.Tools) > 0 {
			parts = append(parts, s.Name+" = "+strings.Join(s.Tools, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

// SubagentTools returns the names of the tools whose rows let sub-agents
// use them (those of them that are on, as the registry decides).
func SubagentTools() []string { return agentTools(allAgents) }

// ConversationTools returns the names of the tools whose rows let the
// voice-device conversation agent use them.
func ConversationTools() []string { return agentTools(conversationAgent) }

// agentTools returns the tools whose rows allow at least use.
func agentTools(use agentUse) []string {
	names := []string{}
	for _, s := range toolsets() {
		for _, t := range s.tools {
			if t.agents >= use {
				names = append(names, t.name)
			}
		}
	}
	return names
}

// Selection is which tools the operator switched on: every tool, or those
// named in TOOLSVC_TOOLS_ENABLED, less those in TOOLSVC_TOOLS_DISABLED.
type Selection struct {
	enabled  []string // nil: all
	disabled []string
	// mcpEnabled and mcpDisabled are the names in the lists that stand
	// for MCP servers ("<server>") or their tools ("<server>__<tool>"),
	// whose tools are known only once the servers run.
	mcpEnabled  []string
	mcpDisabled []string
}

// NewSelection resolves the two lists of tool and toolset names; an
// unknown name is an error naming the nearest known one.
func NewSelection(enabled, disabled []string) (Selection, error) {
	return newSelection(enabled, disabled, nil, nil)
}

// newSelection is NewSelection over the built-in toolsets and extra ones
// (those of the tools file), and the names of the MCP servers: a server's
// name switches all its tools, "<server>__<tool>" one of them. A server
// named like a built-in toolset or tool is switched with it by that name.
func newSelection(enabled, disabled []string, extra []Toolset, servers []string) (Selection, error) {
	sets := append(Toolsets(), extra...)
	for _, n := range servers {
		// The server's name is known, with no tools known yet.
		sets = append(sets, Toolset{Name: n})
	}
	var s Selection
	if len(enabled) > 0 {
		names, mcp := splitMCPNames(enabled, servers)
		on, err := resolveIn(sets, names)
		if err != nil {
			return s, fmt.Errorf("%s_TOOLS_ENABLED: %w", config.Prefix, err)
		}
		s.enabled = append([]string{}, on...) // not nil: only these
		s.mcpEnabled = mcp
	}
	names, mcp := splitMCPNames(disabled, servers)
	off, err := resolveIn(sets, names)
	if err != nil {
		return s, fmt.Errorf("%s_TOOLS_DISABLED: %w", config.Prefix, err)
	}
	s.disabled = off
	s.mcpDisabled = mcp
	return s, nil
}

// splitMCPNames returns the names that stand for MCP servers or their
// tools (mcp), and the others with the servers' names kept (a server may
// share its name with a toolset) but not their tools' names.
func splitMCPNames(names, servers []string) (rest, mcp []string) {
	for _, n := range names {
		isTool := false
		for _, srv := range servers {
			if strings.HasPrefix(n, srv+"__") {
				isTool = true
			}
		}
		switch {
		case isTool:
			mcp = append(mcp, n)
		case slices.Contains(servers, n):
			mcp = append(mcp, n)
			rest = append(rest, n)
		default:
			rest = append(rest, n)
		}
	}
	return rest, mcp
}

// OffMCP reports whether the selection leaves out the tool named tool of
// the MCP server server, and why: the lists may name the server or the
// tool.
func (s Selection) OffMCP(server, tool string) (reason string, off bool) {
	if slices.Contains(s.mcpDisabled, server) || slices.Contains(s.mcpDisabled, tool) {
		return "switched off by " + config.Prefix + "_TOOLS_DISABLED", true
	}
	if s.enabled != nil && !slices.Contains(s.mcpEnabled, server) && !slices.Contains(s.mcpEnabled, tool) {
		return "not in " + config.Prefix + "_TOOLS_ENABLED", true
	}
	return "", false
}

// Only is a selection of the given tools and toolsets, for a registry
// that holds some tools only.
func Only(names ...string) (Selection, error) { return NewSelection(names, nil) }

// Off reports whether the selection leaves tool out, and why.
func (s Selection) Off(tool string) (reason string, off bool) {
	if slices.Contains(s.disabled, tool) {
		return "switched off by " + config.Prefix + "_TOOLS_DISABLED", true
	}
	if s.enabled != nil && !slices.Contains(s.enabled, tool) {
		return "not in " + config.Prefix + "_TOOLS_ENABLED", true
	}
	return "", false
}

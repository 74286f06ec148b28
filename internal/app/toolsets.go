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

// toolDef is one tool: its name and how it is built from the service's
// parts. build returns the tool and a note for the start-up log, or no tool
// and the reason it is off here (a dependency missing), or an error that
// stops start-up (a setting that cannot work).
type toolDef struct {
	name  string
	build func(b *builder) (t registry.Tool, note string, err error)
}

type toolsetDef struct {
	name  string
	tools []toolDef
}

// toolsets is every tool of the service, by toolset, in the order they are
// built. A new tool is a row here and a file in internal/tools.
func toolsets() []toolsetDef {
	return []toolsetDef{
		{Files, []toolDef{
			{"read_file", (*builder).readFile},
			{"write_file", (*builder).writeFile},
			{"edit_file", (*builder).editFile},
			{"list_dir", (*builder).listDir},
			{"file_search", (*builder).fileSearch},
		}},
		{Shell, []toolDef{{"exec", (*builder).exec}}},
		{Web, []toolDef{{"web_fetch", (*builder).webFetch}, {"screenshot", (*builder).screenshot}}},
		{Memory, []toolDef{{"memory", (*builder).memory}}},
		{Agents, []toolDef{{"spawn", (*builder).spawn}, {"workflow_run", (*builder).workflowRun}, {"send_message", (*builder).sendMessage}}},
		{Channels, []toolDef{{"send_media", (*builder).sendMedia}}},
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

// SubagentTools returns the names of the tools a sub-agent may use: the
// file tools, exec, web_fetch and memory (those of them that are on, as
// the registry decides). Never spawn or another agent tool (a sub-agent
// cannot start sub-agents), no channel (it cannot reach the user), and no
// screenshot (it could not look at the picture).
func SubagentTools() []string {
	names, err := Resolve([]string{Files, Shell, "web_fetch", Memory})
	if err != nil {
		panic(err) // a name above is wrong; TestSubagentTools catches it
	}
	return names
}

// Selection is which tools the operator switched on: every tool, or those
// named in TOOLSVC_TOOLS_ENABLED, less those in TOOLSVC_TOOLS_DISABLED.
type Selection struct {
	enabled  []string // nil: all
	disabled []string
}

// NewSelection resolves the two lists of tool and toolset names; an
// unknown name is an error naming the nearest known one.
func NewSelection(enabled, disabled []string) (Selection, error) {
	return newSelection(enabled, disabled, nil)
}

// newSelection is NewSelection over the built-in toolsets and extra ones
// (those of the tools file).
func newSelection(enabled, disabled []string, extra []Toolset) (Selection, error) {
	sets := append(Toolsets(), extra...)
	var s Selection
	if len(enabled) > 0 {
		on, err := resolveIn(sets, enabled)
		if err != nil {
			return s, fmt.Errorf("%s_TOOLS_ENABLED: %w", config.Prefix, err)
		}
		s.enabled = on
	}
	off, err := resolveIn(sets, disabled)
	if err != nil {
		return s, fmt.Errorf("%s_TOOLS_DISABLED: %w", config.Prefix, err)
	}
	s.disabled = off
	return s, nil
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

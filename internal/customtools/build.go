package customtools

import (
	"fmt"

	"github.com/countbot/toolsvc/internal/registry"
)

// Deps are what the file's tools are built with.
type Deps struct {
	// Command runs command tools; nil leaves them out, for the reason
	// CommandOff gives (no sandbox works here, no /bin/sh...).
	Command    *CommandDeps
	CommandOff string
	HTTP       HTTPDeps
}

// Built is what Build made of a file.
type Built struct {
	Tools []registry.Tool
	// On lists the tools built, Off the others with the reason.
	On  []string
	Off map[string]string
	// Notes say how each tool built runs, for the start-up log.
	Notes map[string]string
	// Subagents lists the tools built that sub-agents may call.
	Subagents []string
	// Secrets are the values the tools read from the environment for
	// their headers; they must be redacted everywhere.
	Secrets []string
}

// Build makes the tools of f. off reports whether the operator's switches
// leave a tool out (by its name or its toolset), and why. An error (a
// sandbox that cannot be built, a guard that cannot) names the entry.
func Build(f *File, d Deps, off func(name string) (string, bool)) (Built, error) {
	b := Built{Off: map[string]string{}, Notes: map[string]string{}}
	for _, s := range f.Tools {
		if s.HTTP != nil {
			b.Secrets = append(b.Secrets, s.HTTP.Secrets...)
		}
		if why, ok := off(s.Name); ok {
			b.Off[s.Name] = why
			continue
		}
		var t interface {
			registry.Tool
			fmt.Stringer
		}
		switch {
		case s.HTTP != nil:
			h, err := NewHTTP(s, d.HTTP)
			if err != nil {
				return Built{}, fmt.Errorf("tools file %s: %w", f.Path, err)
			}
			t = h
		case d.Command == nil:
			b.Off[s.Name] = d.CommandOff
			continue
		default:
			c, err := NewCommand(s, *d.Command)
			if err != nil {
				return Built{}, fmt.Errorf("tools file %s: %s: %w", f.Path, s.Entry, err)
			}
			t = c
		}
		b.Tools = append(b.Tools, t)
		b.On = append(b.On, s.Name)
		b.Notes[s.Name] = t.String()
		if s.Subagents {
			b.Subagents = append(b.Subagents, s.Name)
		}
	}
	return b, nil
}

// Toolsets returns the toolsets of f's tools: toolset name -> tool names,
// in file order.
func (f *File) Toolsets() map[string][]string {
	out := map[string][]string{}
	for _, s := range f.Tools {
		out[s.Toolset] = append(out[s.Toolset], s.Name)
	}
	return out
}

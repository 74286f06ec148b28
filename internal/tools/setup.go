// Package tools holds one file per tool and Register, which adds the tools
// whose dependencies are configured to a registry.
package tools

import (
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/config"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/workspace"
)

// Deps is what the tools are built from. Register hands each tool the parts
// it needs.
type Deps struct {
	Config    config.Config
	Workspace *workspace.Workspace
	DataDir   string // the service's private folder, never visible to tools
	Log       zerolog.Logger
}

// Register builds every tool whose dependencies are configured and adds it
// to reg. The returned function releases what the tools hold (browsers,
// locks); call it on shutdown.
func Register(reg *registry.Registry, d Deps) (cleanup func(), err error) {
	var closers []func()
	cleanup = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	c := d.Config
	list := []registry.Tool{
		NewReadFile(d.Workspace, c.ReadMaxChars, nil),
		NewWriteFile(d.Workspace),
		NewEditFile(d.Workspace),
		NewListDir(d.Workspace, c.ListMaxEntries),
	}
	for _, t := range list {
		if err := reg.Register(t); err != nil {
			cleanup()
			return nil, err
		}
	}
	return cleanup, nil
}

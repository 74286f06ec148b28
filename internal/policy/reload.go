package policy

import (
	"github.com/rs/zerolog"
)

// Reloader keeps an Enforcer's policy from the file at its path: Load at
// start-up, where a mistake stops the service, and Reload on SIGHUP, where
// a mistake keeps the policy in force and is logged. names gives what the
// file may name at the time of each load (the tools file's toolsets and
// MCP servers change with its own reload).
type Reloader struct {
	enf   *Enforcer
	path  string
	names func() Names
	log   zerolog.Logger
}

// NewReloader returns a Reloader of the policy file at path into enf.
func NewReloader(enf *Enforcer, path string, names func() Names, log zerolog.Logger) *Reloader {
	return &Reloader{enf: enf, path: path, names: names, log: log}
}

// Load reads the file and puts its policy in force; on an error nothing
// changes.
func (r *Reloader) Load() error {
	p, err := Load(r.path, r.names())
	if err != nil {
		return err
	}
	r.enf.Set(p)
	return nil
}

// Reload is Load that logs its outcome: on an error the policy in force
// stays, and the log says why.
func (r *Reloader) Reload() error {
	if err := r.Load(); err != nil {
		r.log.Error().Err(err).Str("file", r.path).Msg("policy file reload failed; the policy in force is kept")
		return err
	}
	r.log.Info().Str("file", r.path).Msg("policy file reloaded")
	return nil
}

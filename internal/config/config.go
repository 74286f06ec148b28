// Package config reads toolsvc's configuration from TOOLSVC_* environment
// variables, with a default and a description for each, and validates it.
package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/rs/zerolog"
)

// Prefix is the prefix of every variable.
const Prefix = "TOOLSVC"

// Config is the whole configuration. Every field has an envconfig name, a
// default and a description; `toolsvc -h` prints them.
type Config struct {
	// Service
	Addr               string        `envconfig:"ADDR" default:"127.0.0.1:8080" desc:"host:port to listen on"`
	Workspace          string        `envconfig:"WORKSPACE" default:"./workspace" desc:"folder the tools work in; created if missing"`
	DataDir            string        `envconfig:"DATA_DIR" default:"./data" desc:"folder for the service's own data (audit_logs/); never visible to tools"`
	APIKeys            Secrets       `envconfig:"API_KEYS" desc:"comma-separated bearer keys; when set, every route but /healthz and /readyz needs one"`
	AllowInsecure      bool          `envconfig:"ALLOW_INSECURE" default:"false" desc:"allow listening on a non-loopback address without API keys"`
	RestrictWorkspace  bool          `envconfig:"RESTRICT_TO_WORKSPACE" default:"true" desc:"confine every path tools use to the workspace"`
	LogLevel           string        `envconfig:"LOG_LEVEL" default:"info" desc:"debug, info, warn or error"`
	MaxBodyBytes       int64         `envconfig:"MAX_BODY_BYTES" default:"10485760" desc:"largest request body accepted (413 above it)"`
	CallTimeout        time.Duration `envconfig:"CALL_TIMEOUT" default:"2m" desc:"deadline of a tool call, for tools without their own"`
	MaxConcurrentCalls int           `envconfig:"MAX_CONCURRENT_CALLS" default:"64" desc:"tool calls running at once; more get 503"`
	ShutdownTimeout    time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"10s" desc:"how long shutdown waits for canceled calls to report"`

	// Audit
	AuditEnabled        bool `envconfig:"AUDIT_ENABLED" default:"true" desc:"write one JSON file per call under DATA_DIR/audit_logs/"`
	AuditRetentionDays  int  `envconfig:"AUDIT_RETENTION_DAYS" default:"30" desc:"delete audit day folders older than this (0 keeps all)"`
	AuditMaxResultChars int  `envconfig:"AUDIT_MAX_RESULT_CHARS" default:"2000" desc:"results are cut to this many characters in the audit log"`

	// Filesystem tools
	ReadMaxChars   int `envconfig:"READ_MAX_CHARS" default:"50000" desc:"read_file output cap per call, in characters"`
	ListMaxEntries int `envconfig:"LIST_MAX_ENTRIES" default:"500" desc:"list_dir entries shown per call"`
}

// Secrets is a comma-separated list of secret values. It never prints them.
type Secrets []string

// Decode implements envconfig.Decoder.
func (s *Secrets) Decode(v string) error {
	*s = splitList(v, ",")
	return nil
}

// String hides the values.
func (s Secrets) String() string { return fmt.Sprintf("[%d hidden]", len(s)) }

// List is a comma-separated list of plain values.
type List []string

// Decode implements envconfig.Decoder.
func (l *List) Decode(v string) error {
	*l = splitList(v, ",")
	return nil
}

// Patterns is a list of regular expressions, one per line, or separated by
// commas when the value has no newline.
type Patterns []string

// Decode implements envconfig.Decoder; every pattern must compile.
func (p *Patterns) Decode(v string) error {
	sep := ","
	if strings.Contains(v, "\n") {
		sep = "\n"
	}
	list := splitList(v, sep)
	for _, pat := range list {
		if _, err := regexp.Compile(pat); err != nil {
			return fmt.Errorf("invalid pattern %q: %v", pat, err)
		}
	}
	*p = list
	return nil
}

func splitList(v, sep string) []string {
	var out []string
	for _, f := range strings.Split(v, sep) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Load reads the configuration from the environment and validates it. An
// error names the variable at fault.
func Load() (Config, error) {
	var c Config
	if err := envconfig.Process(Prefix, &c); err != nil {
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			return c, fmt.Errorf("%s=%q is not a valid %s: %v", pe.KeyName, pe.Value, pe.TypeName, pe.Err)
		}
		return c, err
	}
	return c, c.Validate()
}

// Validate checks values that parse but make no sense.
func (c Config) Validate() error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s_%s: %s", Prefix, name, fmt.Sprintf(format, args...)))
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		bad("ADDR", "%q is not host:port (%v)", c.Addr, err)
	} else if !isLoopback(host) && len(c.APIKeys) == 0 && !c.AllowInsecure {
		bad("ADDR", "%q is not a loopback address and TOOLSVC_API_KEYS is empty: anyone who can reach it could run commands. Set TOOLSVC_API_KEYS, or TOOLSVC_ALLOW_INSECURE=true if something else guards the port", c.Addr)
	}
	for _, k := range c.APIKeys {
		if len(k) < 16 {
			bad("API_KEYS", "every key must be at least 16 characters long")
			break
		}
	}
	if c.Workspace == "" {
		bad("WORKSPACE", "must not be empty")
	}
	if c.DataDir == "" {
		bad("DATA_DIR", "must not be empty")
	}
	if _, err := zerolog.ParseLevel(c.LogLevel); err != nil || c.LogLevel == "" {
		bad("LOG_LEVEL", "%q is not one of debug, info, warn, error", c.LogLevel)
	}
	positive := []struct {
		name string
		v    int64
	}{
		{"MAX_BODY_BYTES", c.MaxBodyBytes},
		{"CALL_TIMEOUT", int64(c.CallTimeout)},
		{"MAX_CONCURRENT_CALLS", int64(c.MaxConcurrentCalls)},
		{"SHUTDOWN_TIMEOUT", int64(c.ShutdownTimeout)},
		{"AUDIT_MAX_RESULT_CHARS", int64(c.AuditMaxResultChars)},
		{"READ_MAX_CHARS", int64(c.ReadMaxChars)},
		{"LIST_MAX_ENTRIES", int64(c.ListMaxEntries)},
	}
	for _, p := range positive {
		if p.v <= 0 {
			bad(p.name, "must be greater than zero")
		}
	}
	if c.AuditRetentionDays < 0 {
		bad("AUDIT_RETENTION_DAYS", "must be zero (keep all) or more")
	}
	return errors.Join(errs...)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Secrets returns every secret value in the configuration, for redaction.
func (c Config) SecretValues() []string {
	return append([]string(nil), c.APIKeys...)
}

const usageFormat = `toolsvc serves CountBot's agent tools over HTTP/JSON.

Usage: toolsvc [-h]

It is configured through the environment only:

VARIABLE	DEFAULT	MEANING
{{range .}}{{usage_key .}}	{{with usage_default .}}{{.}}{{else}}-{{end}}	{{usage_description .}}
{{end}}`

// Usage writes every variable with its default and meaning.
func Usage(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if err := envconfig.Usagef(Prefix, &Config{}, tw, usageFormat); err != nil {
		return err
	}
	return tw.Flush()
}

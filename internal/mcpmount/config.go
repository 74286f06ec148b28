// Package mcpmount mounts the tools of an MCP server as toolsvc tools: it
// starts a stdio server inside exec's sandbox (or connects to a Streamable
// HTTP one), lists its tools, and turns each into a registry.Tool named
// "<server>__<tool>" whose calls go to the server through the official
// go-sdk client. A server that dies is restarted with backoff; a server
// whose tool list changes is listed again.
package mcpmount

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/redact"
)

// Transport types of Config.Type.
const (
	TypeStdio = "stdio"
	TypeHTTP  = "streamable-http"
)

// Config is one entry of the "mcpServers" map that MCP clients use (Claude
// Desktop, Cursor, mcpo, VS Code), plus toolsvc's own keys: network and
// timeout, subagents, per_key and the bounds of its instances.
type Config struct {
	// Command, Args, Env and Cwd start a stdio server. Cwd is relative to
	// the workspace (default: the workspace itself).
	Command string            `json:"command,omitempty" yaml:"command,omitempty"`
	Args    []string          `json:"args,omitempty" yaml:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty" yaml:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty" yaml:"cwd,omitempty"`
	// Type is "stdio" or "streamable-http" after ParseConfig ("http" and
	// "streamableHttp" are accepted as spellings of the latter; empty
	// means stdio with a command and streamable-http with a url).
	Type string `json:"type,omitempty" yaml:"type,omitempty"`
	// URL and Headers reach a Streamable HTTP server. A header value may
	// name environment variables of the service as ${NAME}; the values
	// are secrets.
	URL     string            `json:"url,omitempty" yaml:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty" yaml:"headers,omitempty"`
	// Network lets a stdio server use the network: off by default, as for
	// exec, but a package runner's (npx, uvx...) registry; true: every
	// address; a list: those destinations only, through a proxy in the
	// service (see Network).
	Network Network `json:"network,omitempty" yaml:"network,omitempty"`
	// Timeout bounds one tool call; 0 means the registry's default. In
	// the file: seconds as a number (as Cline writes it) or a duration
	// string such as "90s".
	Timeout time.Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// Disabled is set by clients that switch a server off without
	// removing it; the caller leaves such a server out.
	Disabled bool `json:"disabled,omitempty" yaml:"disabled,omitempty"`
	// Subagents lets the service's sub-agents call the server's tools, as
	// the key of the same name does for a command or HTTP tool; off by
	// default.
	Subagents bool `json:"subagents,omitempty" yaml:"subagents,omitempty"`
	// PerKey gives each key an instance of the (stdio) server of its own,
	// in the key's folder, started at its first call: see instances.
	PerKey bool `json:"per_key,omitempty" yaml:"per_key,omitempty"`
	// IdleTimeout stops a key's instance after that long without a call;
	// DefaultIdleTimeout when PerKey and not given. In the file: seconds
	// as a number or a duration string, as timeout.
	IdleTimeout time.Duration `json:"idle_timeout,omitempty" yaml:"idle_timeout,omitempty"`
	// MaxInstances bounds the keys' instances running at once;
	// DefaultMaxInstances when PerKey and not given.
	MaxInstances int `json:"max_instances,omitempty" yaml:"max_instances,omitempty"`
}

// The bounds of a per_key server's instances when its entry gives none:
// an instance a key stopped using goes after ten minutes, and at most
// eight run at once (each is a process with its own memory).
const (
	DefaultIdleTimeout  = 10 * time.Minute
	DefaultMaxInstances = 8
)

// ignoredKeys are keys other MCP clients write into an entry that mean
// nothing here (approval lists, UI hints); a pasted config keeps working.
var ignoredKeys = []string{"autoApprove", "alwaysAllow", "description", "name", "transportType", "disabledTools"}

// knownKeys are the keys Config reads.
var knownKeys = []string{"command", "args", "env", "cwd", "type", "url", "headers", "network", "timeout", "disabled", "subagents",
	"per_key", "idle_timeout", "max_instances"}

// ParseConfig decodes one mcpServers entry. Keys other MCP clients write
// for their own use (autoApprove, alwaysAllow, description, ...) are
// ignored; any other unknown key is an error naming it, so that a typo
// ("comand", "header") is not silently dropped. The entry must name
// exactly one of a command and a url.
func ParseConfig(raw json.RawMessage) (Config, error) {
	if err := checkKeys(raw); err != nil {
		return Config{}, err
	}
	var wire struct {
		Config
		Timeout      json.RawMessage `json:"timeout"`
		IdleTimeout  json.RawMessage `json:"idle_timeout"`
		MaxInstances json.RawMessage `json:"max_instances"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&wire); err != nil {
		return Config{}, fmt.Errorf("MCP server entry: %w", err)
	}
	c := wire.Config
	if len(wire.Timeout) > 0 {
		d, err := parseTimeout("timeout", wire.Timeout)
		if err != nil {
			return Config{}, err
		}
		c.Timeout = d
	}
	if len(wire.IdleTimeout) > 0 {
		d, err := parseTimeout("idle_timeout", wire.IdleTimeout)
		if err != nil {
			return Config{}, err
		}
		if d <= 0 {
			return Config{}, errors.New("idle_timeout must be more than zero")
		}
		c.IdleTimeout = d
	}
	if len(wire.MaxInstances) > 0 {
		if err := json.Unmarshal(wire.MaxInstances, &c.MaxInstances); err != nil || c.MaxInstances < 1 {
			return Config{}, fmt.Errorf("max_instances %s: give a whole number, at least 1", wire.MaxInstances)
		}
	}
	var err error
	if c.Type, err = transportType(c); err != nil {
		return Config{}, err
	}
	if err := c.checkTransport(); err != nil {
		return Config{}, err
	}
	if err := c.checkPerKey(wire.IdleTimeout != nil, wire.MaxInstances != nil); err != nil {
		return Config{}, err
	}
	for name := range c.Env {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return Config{}, fmt.Errorf("env: %q is not a variable name", name)
		}
	}
	if c.Timeout < 0 {
		return Config{}, errors.New("timeout must not be negative")
	}
	return c, nil
}

// checkKeys refuses an entry that is no object or holds an unknown key.
func checkKeys(raw json.RawMessage) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
		return fmt.Errorf("an MCP server entry must be a JSON object with a command or a url: %v", errOr(err, "got null"))
	}
	var unknown []string
	for k := range keys {
		if !slices.Contains(knownKeys, k) && !slices.Contains(ignoredKeys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	if slices.Contains(unknown, "envFile") {
		return errors.New(`"envFile" is not supported: list the variables under "env" (values may read the service's variables as ${NAME})`)
	}
	return fmt.Errorf("unknown key %s (known: %s)", quoteList(unknown), strings.Join(knownKeys, ", "))
}

// transportType is the entry's transport, TypeStdio or TypeHTTP, from its
// type (the names other clients write included) or, without one, from
// whether it gives a url and no command.
func transportType(c Config) (string, error) {
	switch c.Type {
	case "":
		if c.URL != "" && c.Command == "" {
			return TypeHTTP, nil
		}
		return TypeStdio, nil
	case "stdio":
		return TypeStdio, nil
	case "streamable-http", "http", "streamableHttp", "streamable_http":
		return TypeHTTP, nil
	case "sse":
		return "", errors.New(`type "sse" (the HTTP+SSE transport that MCP deprecated in 2025) is not supported: use the server's Streamable HTTP endpoint with type "streamable-http"`)
	}
	return "", fmt.Errorf(`unknown type %q (want "stdio" or "streamable-http")`, c.Type)
}

// checkTransport refuses keys that belong to the other transport, and a
// transport without what it needs.
func (c Config) checkTransport() error {
	if c.Type == TypeStdio {
		if strings.TrimSpace(c.Command) == "" {
			return errors.New(`a stdio MCP server needs a "command" (or give a "url" for a Streamable HTTP one)`)
		}
		if c.URL != "" || len(c.Headers) > 0 {
			return errors.New(`"url" and "headers" belong to a Streamable HTTP server; a stdio server has "command", "args", "env" and "cwd"`)
		}
		return nil
	}
	switch {
	case c.URL == "":
		return errors.New(`a Streamable HTTP MCP server needs a "url"`)
	case c.Command != "" || len(c.Args) > 0 || len(c.Env) > 0 || c.Cwd != "":
		return errors.New(`"command", "args", "env" and "cwd" belong to a stdio server; a Streamable HTTP server has "url" and "headers"`)
	case c.Network.Set():
		return errors.New(`"network" applies to stdio servers only: toolsvc itself connects to a Streamable HTTP server`)
	case !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://"):
		return fmt.Errorf("url %q must start with http:// or https://", c.URL)
	}
	return nil
}

// checkPerKey refuses the keys of per-key instances where they cannot
// apply, and fills in their defaults. idle and most say whether the entry
// gave idle_timeout and max_instances.
func (c *Config) checkPerKey(idle, most bool) error {
	if !c.PerKey {
		if idle || most {
			return errors.New(`"idle_timeout" and "max_instances" bound the instances of a server with "per_key": true; add it, or remove them`)
		}
		return nil
	}
	switch {
	case c.Type != TypeStdio:
		return errors.New(`"per_key" applies to stdio servers, which toolsvc starts once for each key; a Streamable HTTP server runs elsewhere, and separating its keys is up to it`)
	case c.Cwd != "":
		return errors.New(`"cwd" does not go with "per_key": each key's instance starts in the key's own folder; name a place inside it with ${WORKSPACE} in "args" or "env"`)
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxInstances == 0 {
		c.MaxInstances = DefaultMaxInstances
	}
	return nil
}

// parseTimeout reads seconds as a number or a Go duration string; key
// names the field in an error.
func parseTimeout(key string, raw json.RawMessage) (time.Duration, error) {
	var n float64
	if err := json.Unmarshal(raw, &n); err == nil {
		return time.Duration(n * float64(time.Second)), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if d, err := time.ParseDuration(s); err == nil {
			return d, nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return time.Duration(f * float64(time.Second)), nil
		}
	}
	return 0, fmt.Errorf(`%s %s: give seconds (60) or a duration ("90s", "2m")`, key, raw)
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// WorkspaceVar names the variable that stands for the workspace's
// absolute path in args, env and header values ("${WORKSPACE}"), so that
// a server can be pointed at it (server-filesystem's folder,
// server-memory's file) whatever the deployment calls it.
const WorkspaceVar = "WORKSPACE"

// expand replaces each ${NAME} in v with the service's variable NAME, and
// ${WORKSPACE} with the workspace's path (workspace, "" when none). A
// variable that is not set is an error naming it, never an empty value
// sent as a credential. read reports whether a variable other than
// WORKSPACE was read.
func expand(v, workspace string, getenv func(string) (string, bool)) (out string, read bool, err error) {
	var missing []string
	out = varRef.ReplaceAllStringFunc(v, func(m string) string {
		name := m[2 : len(m)-1]
		if name == WorkspaceVar && workspace != "" {
			return workspace
		}
		read = true
		val, ok := getenv(name)
		if !ok {
			missing = append(missing, name)
		}
		return val
	})
	if len(missing) > 0 {
		return "", read, fmt.Errorf("the environment variable %s is not set", strings.Join(missing, ", "))
	}
	return out, read, nil
}

// resolved is a Config with every ${NAME} replaced, and the values that
// are secrets.
type resolved struct {
	args    []string
	env     map[string]string
	headers map[string]string
	secrets []string
}

// resolve expands the variables of the headers and env values, and
// ${WORKSPACE} in args (only that one: args show in the process list).
// Every header value is a secret (it carries credentials more often than
// not), and so is every env value that read a variable or whose name
// looks secret (GITHUB_TOKEN, API_KEY).
func (c Config) resolve(workspace string, getenv func(string) (string, bool)) (resolved, error) {
	r := resolved{env: map[string]string{}, headers: map[string]string{}}
	for _, a := range c.Args {
		r.args = append(r.args, strings.ReplaceAll(a, "${"+WorkspaceVar+"}", workspace))
	}
	for _, k := range sortedKeys(c.Headers) {
		v, _, err := expand(c.Headers[k], workspace, getenv)
		if err != nil {
			return r, fmt.Errorf("header %s: %w", k, err)
		}
		r.headers[k] = v
		r.secrets = append(r.secrets, v)
		if _, tok, ok := strings.Cut(v, " "); ok {
			r.secrets = append(r.secrets, tok) // the token of "Bearer <token>"
		}
	}
	for _, k := range sortedKeys(c.Env) {
		v, read, err := expand(c.Env[k], workspace, getenv)
		if err != nil {
			return r, fmt.Errorf("env %s: %w", k, err)
		}
		r.env[k] = v
		if read || redact.SecretName(k) {
			r.secrets = append(r.secrets, v)
		}
	}
	return r, nil
}

// Secrets returns the entry's secret values (see resolve) as they will be
// sent, reading ${NAME} with lookupEnv (nil: os.LookupEnv) and
// ${WORKSPACE} as workspace, so that the service can add them to its
// redaction before any server starts. A value whose variable is not set
// is left out here; Start reports it.
func (c Config) Secrets(workspace string, lookupEnv func(string) (string, bool)) []string {
	if lookupEnv == nil {
		lookupEnv = lookupEnv0
	}
	var out []string
	for k, v := range c.Headers {
		if r, err := (Config{Headers: map[string]string{k: v}}).resolve(workspace, lookupEnv); err == nil {
			out = append(out, r.secrets...)
		}
	}
	for k, v := range c.Env {
		if r, err := (Config{Env: map[string]string{k: v}}).resolve(workspace, lookupEnv); err == nil {
			out = append(out, r.secrets...)
		}
	}
	sort.Strings(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}

// lookupEnv0 is the default source of ${NAME} values.
func lookupEnv0(name string) (string, bool) { return os.LookupEnv(name) }

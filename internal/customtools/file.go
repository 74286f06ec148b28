// Package customtools reads the operator's tools file (TOOLSVC_TOOLS_FILE)
// and builds its tools: programs run in exec's sandbox (the command runner)
// and HTTP endpoints the arguments are POSTed to (the http runner). The
// file's mcpServers section is parsed only as far as its shape goes and
// kept raw, for the package that mounts MCP servers.
//
// The file is YAML or JSON (JSON is YAML). Every mistake in it (an unknown
// key, a missing field, an unknown runner, a schema that is not JSON
// Schema, a bad name, a variable that is not set) is an error naming the
// file and the entry, so that start-up stops, or a reload keeps the tools
// it had, with a message the operator can act on.
package customtools

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/countbot/toolsvc/internal/approval"
	"github.com/countbot/toolsvc/internal/registry"
)

// DefaultToolset is the toolset of a tool whose entry names none.
const DefaultToolset = "custom"

// MaxFileBytes bounds the tools file.
const MaxFileBytes = 4 << 20

// File is a tools file, checked.
type File struct {
	Path  string
	Tools []Spec
	// MCPServers holds each entry of mcpServers as JSON, as written (the
	// standard keys of MCP clients and toolsvc's own), by server name.
	MCPServers map[string]json.RawMessage
}

// Spec is one tool of the file.
type Spec struct {
	Name        string
	Description string
	Parameters  json.RawMessage // a JSON Schema of type object
	// Exactly one runner: Argv or Shell (the command runner), or HTTP.
	Argv    []string
	Shell   string
	HTTP    *HTTPSpec
	Network bool // command runner: may use the network
	// NetAllow, for a command runner, is an allowlist instead: the
	// destinations its programs may reach, through the service's proxy.
	NetAllow []string
	// Timeout and MaxOutput bound one call; zero: the runner's default.
	Timeout   time.Duration
	MaxOutput int
	Subagents bool   // sub-agents may call it
	Toolset   string // for TOOLSVC_TOOLS_ENABLED / DISABLED; default DefaultToolset
	// Hints are the title and annotations the entry states (title,
	// annotations), for MCP clients; what it leaves out takes MCP's
	// defaults, and the title defaults to the name.
	Hints registry.Annotations
	// Approval is the entry's own approval rule, when it gives one: which
	// calls of the tool wait for a person. A policy file's rule for the
	// tool comes first.
	Approval *approval.Rule
	// Entry names the entry in errors: `tools file x.yaml, tool "name" (entry 2)`.
	Entry string
}

// Runner names the spec's runner: "command" or "http".
func (s Spec) Runner() string {
	if s.HTTP != nil {
		return "http"
	}
	return "command"
}

// HTTPSpec is the http runner of a tool.
type HTTPSpec struct {
	URL *url.URL
	// Headers are sent with every request, ${VAR} already replaced.
	Headers map[string]string
	// Secrets are the values read from the environment for the headers.
	Secrets []string
	// AllowPrivate lets the request reach the URL's host at a private,
	// loopback or link-local address (an internal service of the
	// operator's), which the network guard refuses by default.
	AllowPrivate bool
}

// entry is a tool as written; unknown keys are refused by the decoder.
type entry struct {
	Name        string         `yaml:"name"`
	Description string         `yaml:"description"`
	Parameters  any            `yaml:"parameters"`
	Command     any            `yaml:"command"`
	Shell       *string        `yaml:"shell"`
	HTTP        *httpEntry     `yaml:"http"`
	Network     any            `yaml:"network"`
	Timeout     any            `yaml:"timeout"`
	MaxOutput   int            `yaml:"max_output"`
	Subagents   bool           `yaml:"subagents"`
	Toolset     string         `yaml:"toolset"`
	Title       string         `yaml:"title"`
	Annotations *hintsEntry    `yaml:"annotations"`
	Approval    any            `yaml:"approval"`
	Extra       map[string]any `yaml:",inline"`
}

// hintsEntry are MCP's tool annotations as an entry states them.
type hintsEntry struct {
	ReadOnly    *bool          `yaml:"readOnlyHint"`
	Destructive *bool          `yaml:"destructiveHint"`
	Idempotent  *bool          `yaml:"idempotentHint"`
	OpenWorld   *bool          `yaml:"openWorldHint"`
	Extra       map[string]any `yaml:",inline"`
}

// hints are the title and annotations of e: what it states, else MCP's
// defaults (not read-only, destructive, not idempotent, open world).
func hints(e *entry) (registry.Annotations, error) {
	a := registry.Annotations{Title: strings.TrimSpace(e.Title), Destructive: true, OpenWorld: true}
	if a.Title == "" {
		a.Title = e.Name
	}
	h := e.Annotations
	if h == nil {
		return a, nil
	}
	if len(h.Extra) > 0 {
		return a, fmt.Errorf("unknown key %s in annotations (known: readOnlyHint, destructiveHint, idempotentHint, openWorldHint)", keysOf(h.Extra))
	}
	for _, f := range []struct {
		v   *bool
		out *bool
	}{{h.ReadOnly, &a.ReadOnly}, {h.Destructive, &a.Destructive}, {h.Idempotent, &a.Idempotent}, {h.OpenWorld, &a.OpenWorld}} {
		if f.v != nil {
			*f.out = *f.v
		}
	}
	return a, nil
}

type httpEntry struct {
	URL          string            `yaml:"url"`
	Headers      map[string]string `yaml:"headers"`
	AllowPrivate bool              `yaml:"allow_private"`
	Extra        map[string]any    `yaml:",inline"`
}

type fileShape struct {
	Tools      []yaml.Node          `yaml:"tools"`
	MCPServers map[string]yaml.Node `yaml:"mcpServers"`
	Extra      map[string]any       `yaml:",inline"`
}

// Options are what checking a file needs besides the file.
type Options struct {
	// Getenv reads the variables header values name; default os.LookupEnv.
	Getenv func(name string) (string, bool)
	// Reserved are names custom tools and toolsets may not take (the
	// built-in tools and toolsets), with what holds each, for the error.
	Reserved map[string]string
	// ModelWritable are the folders the model can write into. Load
	// refuses a file that lies in one or is reached through a link that
	// does; empty: the caller checks that with CheckPlace.
	ModelWritable []Area
}

// Load reads and checks the tools file at path. Before reading it, it
// refuses a file the model could change (see ModelWritable) or that
// someone other than the service's user or root could change (the file,
// a link on the way to it or a folder above them belongs to another user
// or is writable by group or others), so that what the file says is the
// operator's.
func Load(path string, opts Options) (*File, error) {
	data, err := readBounded(path, opts.ModelWritable)
	if err != nil {
		if r := (*refusedError)(nil); errors.As(err, &r) {
			return nil, err
		}
		return nil, fmt.Errorf("tools file %s: %w", path, err)
	}
	return Parse(path, data, opts)
}

func readBounded(path string, areas []Area) ([]byte, error) {
	f, err := openChecked(path, areas)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxFileBytes)
	}
	return data, nil
}

// Parse checks the contents of a tools file; path names it in errors.
func Parse(path string, data []byte, opts Options) (*File, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.LookupEnv
	}
	where := "tools file " + path
	var shape fileShape
	if err := yaml.Unmarshal(data, &shape); err != nil {
		return nil, fmt.Errorf("%s: not valid YAML or JSON: %w", where, err)
	}
	if len(shape.Extra) > 0 {
		return nil, fmt.Errorf("%s: unknown key %s at the top (want tools and mcpServers)", where, keysOf(shape.Extra))
	}
	f := &File{Path: path, MCPServers: map[string]json.RawMessage{}}
	names := map[string]string{}    // tool name -> entry
	toolsets := map[string]string{} // toolset -> entry that named it first
	for i, node := range shape.Tools {
		s, err := parseEntry(&node, i+1, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if prev, ok := names[s.Name]; ok {
			return nil, fmt.Errorf("%s: %s and %s have the same name; tool names must be unique", where, prev, s.Entry)
		}
		if held, ok := opts.Reserved[s.Name]; ok {
			return nil, fmt.Errorf("%s: %s clashes with %s %q; choose another name", where, s.Entry, held, s.Name)
		}
		if held, ok := opts.Reserved[s.Toolset]; ok {
			return nil, fmt.Errorf("%s: %s: toolset %q clashes with %s of that name; custom tools go in toolsets of their own", where, s.Entry, s.Toolset, held)
		}
		names[s.Name] = s.Entry
		if _, ok := toolsets[s.Toolset]; !ok {
			toolsets[s.Toolset] = s.Entry
		}
		f.Tools = append(f.Tools, s)
	}
	for ts, e := range toolsets {
		if other, ok := names[ts]; ok {
			return nil, fmt.Errorf("%s: toolset %q of %s is also the name of %s; a switch naming it would be ambiguous", where, ts, e, other)
		}
	}
	for name, node := range shape.MCPServers {
		if !registry.ValidName(name) || strings.Contains(name, "__") {
			return nil, fmt.Errorf("%s: mcpServers %q: a server name must match %s without \"__\"", where, name, registry.NamePattern)
		}
		var v any
		if err := node.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: mcpServers %q: %w", where, name, err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: mcpServers %q: want a mapping (command, args, env... or type, url, headers)", where, name)
		}
		if err := serverServiceRefs(m); err != nil {
			return nil, fmt.Errorf("%s: mcpServers %q: %w", where, name, err)
		}
		js, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s: mcpServers %q: %w", where, name, err)
		}
		f.MCPServers[name] = js
	}
	return f, nil
}

var namePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(registry.NamePattern) })

func parseEntry(node *yaml.Node, n int, opts Options) (Spec, error) {
	var e entry
	label := fmt.Sprintf("tools entry %d", n)
	if err := node.Decode(&e); err != nil {
		return Spec{}, fmt.Errorf("%s (line %d): %w", label, node.Line, err)
	}
	if e.Name != "" {
		label = fmt.Sprintf("tool %q (entry %d, line %d)", e.Name, n, node.Line)
	}
	fail := func(format string, args ...any) (Spec, error) {
		return Spec{}, fmt.Errorf("%s: %s", label, fmt.Sprintf(format, args...))
	}
	if len(e.Extra) > 0 {
		return fail("unknown key %s (known: name, title, description, parameters, command, shell, http, network, timeout, max_output, subagents, toolset, annotations, approval)", keysOf(e.Extra))
	}
	s := Spec{Name: e.Name, Description: strings.TrimSpace(e.Description), MaxOutput: e.MaxOutput,
		Subagents: e.Subagents, Toolset: e.Toolset, Entry: label}
	var err error
	if s.Network, s.NetAllow, err = parseNetwork(e.Network); err != nil {
		return fail("%v", err)
	}
	switch {
	case e.Name == "":
		return fail("name is missing")
	case !namePattern().MatchString(e.Name):
		return fail("name must match %s (letters, digits, _ and -, at most 64)", registry.NamePattern)
	case s.Description == "":
		return fail("description is missing: write for a model what the tool does and when to use it")
	case e.MaxOutput < 0:
		return fail("max_output must be a positive number of characters")
	}
	if s.Toolset == "" {
		s.Toolset = DefaultToolset
	} else if !namePattern().MatchString(s.Toolset) {
		return fail("toolset must match %s", registry.NamePattern)
	}
	if s.Hints, err = hints(&e); err != nil {
		return fail("%v", err)
	}
	if s.Timeout, err = parseTimeout(e.Timeout); err != nil {
		return fail("%v", err)
	}
	if s.Parameters, err = parseParameters(e.Parameters); err != nil {
		return fail("%v", err)
	}
	if s.Approval, err = parseApproval(e.Approval, s.Parameters); err != nil {
		return fail("%v", err)
	}
	if err := parseRunner(&e, &s, opts); err != nil {
		return fail("%v", err)
	}
	return s, nil
}

// parseParameters checks an entry's parameters schema; none means a tool
// without arguments.
func parseParameters(p any) (json.RawMessage, error) {
	if p == nil {
		return json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`), nil
	}
	js, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("parameters: %v", err)
	}
	if err := registry.CheckSchema(js); err != nil {
		return nil, fmt.Errorf("parameters is not a valid JSON Schema: %v", err)
	}
	if err := checkArgNames(js); err != nil {
		return nil, err
	}
	return js, nil
}

// parseRunner fills s's runner from e, which must give exactly one.
func parseRunner(e *entry, s *Spec, opts Options) error {
	var runners []string
	if e.Command != nil {
		runners = append(runners, "command")
	}
	if e.Shell != nil {
		runners = append(runners, "shell")
	}
	if e.HTTP != nil {
		runners = append(runners, "http")
	}
	switch len(runners) {
	case 0:
		return errors.New("no runner: give command (an argv list), shell (a script) or http (a url to POST to)")
	case 1:
	default:
		return fmt.Errorf("more than one runner (%s): give exactly one", strings.Join(runners, ", "))
	}
	switch runners[0] {
	case "command":
		argv, err := parseArgv(e.Command)
		if err != nil {
			return err
		}
		s.Argv = argv
	case "shell":
		if strings.TrimSpace(*e.Shell) == "" || strings.ContainsRune(*e.Shell, 0) {
			return errors.New("shell is empty or holds a NUL character")
		}
		s.Shell = *e.Shell
	case "http":
		if e.Network != nil {
			return errors.New("network is for command tools; an http tool always uses the network")
		}
		h, err := parseHTTP(e.HTTP, opts.Getenv)
		if err != nil {
			return fmt.Errorf("http: %v", err)
		}
		s.HTTP = h
	}
	return nil
}

// parseArgv checks a command runner's argv list.
func parseArgv(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, errors.New("command must be a list: the program and its arguments, run without a shell (use shell: for a script)")
	}
	if len(list) == 0 {
		return nil, errors.New("command is empty: give the program and its arguments")
	}
	var argv []string
	for i, v := range list {
		str, ok := v.(string)
		if !ok {
			str = fmt.Sprint(v)
		}
		if strings.ContainsRune(str, 0) || (i == 0 && strings.TrimSpace(str) == "") {
			return nil, fmt.Errorf("command[%d] is empty or holds a NUL character", i)
		}
		argv = append(argv, str)
	}
	return argv, nil
}

// parseTimeout takes a Go duration ("30s", "2m") or a number of seconds.
func parseTimeout(v any) (time.Duration, error) {
	var d time.Duration
	switch t := v.(type) {
	case nil:
		return 0, nil
	case int:
		d = time.Duration(t) * time.Second
	case float64:
		d = time.Duration(t * float64(time.Second))
	case string:
		var err error
		if d, err = time.ParseDuration(t); err != nil {
			if n, err2 := strconv.Atoi(t); err2 == nil {
				d = time.Duration(n) * time.Second
			} else {
				return 0, fmt.Errorf("timeout %q: want a duration such as 30s or 2m", t)
			}
		}
	default:
		return 0, fmt.Errorf("timeout: want a duration such as 30s or 2m")
	}
	if d <= 0 {
		return 0, fmt.Errorf("timeout must be positive")
	}
	return d, nil
}

// checkArgNames refuses two top-level properties that would become the same
// TOOL_ARG_ variable.
func checkArgNames(schema json.RawMessage) error {
	var top struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(schema, &top) // compiled already
	seen := map[string]string{}
	names := make([]string, 0, len(top.Properties))
	for p := range top.Properties {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		v := EnvName(p)
		if prev, ok := seen[v]; ok {
			return fmt.Errorf("parameters %q and %q would both be the variable %s; rename one", prev, p, v)
		}
		seen[v] = p
	}
	return nil
}

var varRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`) })

func parseHTTP(h *httpEntry, getenv func(string) (string, bool)) (*HTTPSpec, error) {
	if len(h.Extra) > 0 {
		return nil, fmt.Errorf("unknown key %s (known: url, headers, allow_private)", keysOf(h.Extra))
	}
	if h.URL == "" {
		return nil, errors.New("url is missing")
	}
	u, err := url.Parse(h.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url %q: want an absolute http or https URL", h.URL)
	}
	if u.User != nil {
		return nil, fmt.Errorf("url: put credentials in a header read from a variable, not in the URL")
	}
	if err := serviceRefError("url", h.URL); err != nil {
		return nil, err
	}
	out := &HTTPSpec{URL: u, Headers: map[string]string{}, AllowPrivate: h.AllowPrivate}
	keys := make([]string, 0, len(h.Headers))
	for k := range h.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := h.Headers[k]
		if !validHeaderName(k) {
			return nil, fmt.Errorf("header name %q is not valid", k)
		}
		// Checked before any variable is read.
		if err := serviceRefError("header "+k, v); err != nil {
			return nil, err
		}
		var missing []string
		val := varRef().ReplaceAllStringFunc(v, func(ref string) string {
			name := varRef().FindStringSubmatch(ref)[1]
			x, ok := getenv(name)
			if !ok || x == "" {
				missing = append(missing, name)
				return ""
			}
			out.Secrets = append(out.Secrets, x)
			return x
		})
		if len(missing) > 0 {
			return nil, fmt.Errorf("header %s names the variable %s, which is not set", k, strings.Join(missing, ", "))
		}
		if strings.ContainsAny(val, "\r\n\x00") {
			return nil, fmt.Errorf("header %s holds a line break or NUL", k)
		}
		out.Headers[k] = val
	}
	return out, nil
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune(`()<>@,;:\"/[]?={}`, c) {
			return false
		}
	}
	return true
}

// keysOf lists the keys of m, quoted and sorted.
func keysOf(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, strconv.Quote(k))
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

// EnvName is the variable an argument named arg arrives in: TOOL_ARG_ and
// the name upper-cased, each character that is not a letter, a digit or
// _ replaced by _ (so "user-id" and "user.id" are TOOL_ARG_USER_ID).
func EnvName(arg string) string {
	var b strings.Builder
	b.WriteString("TOOL_ARG_")
	for _, c := range strings.ToUpper(arg) {
		if (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Package config reads toolsvc's configuration from TOOLSVC_* environment
// variables, with a default and a description for each, and validates it.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/countbot/toolsvc/internal/pathx"
	"github.com/countbot/toolsvc/internal/redact"
)

// Prefix is the prefix of every variable.
const Prefix = "TOOLSVC"

// Config is the whole configuration, one section per part of the
// service. Each section is embedded, so its fields also read as the
// Config's own (c.ExecTimeout); internal/app hands each part its section
// (c.Exec), or a struct of its own built from it, and reads no setting
// through the whole. Every field has an env name, a default
// where it has one, and a description: toolsvc help and
// docs/configuration.md are generated from them, grouped by section (the
// section tag is the heading, doc the text under it, group the name
// toolsvc help GROUP takes). The settings a first-time user sets also have
// a brief tag, their meaning in a few words: toolsvc -h lists them alone.
type Config struct {
	Access     `group:"access" section:"Listening and access" doc:"Where the service listens and who may call it: bearer keys, browser origins and the host names requests may carry."`
	Server     `group:"workspace" section:"Workspace, data and logs" doc:"The folders the service works in, its log level and how it shuts down."`
	Calls      `group:"calls" section:"Calls" doc:"Limits on every tool call, whichever door (REST, /mcp) it comes through."`
	Switches   `group:"tools" section:"Tool switches" doc:"Which tools are offered: names of tools or of toolsets (files, shell, web, memory, agents, channels), checked against the service's tools, and the operator's own tools."`
	Audit      `group:"audit" section:"Audit log" doc:"One JSON file per call under DATA_DIR/audit_logs/."`
	Files      `group:"files" section:"File tools" doc:"read_file, list_dir and file_search."`
	Memory     `group:"memory" section:"Memory and skills" doc:"The memory tool and the skills under workspace/skills/."`
	Web        `group:"web" section:"Network guard and web_fetch" doc:"What outbound tools may reach (the guard refuses private, loopback and metadata addresses unless allowed here), and web_fetch's limits."`
	Screenshot `group:"screenshot" section:"Web page screenshots" doc:"The headless browser behind screenshot type=web."`
	Exec       `group:"exec" section:"Shell commands" doc:"exec: the command guard judges every script, the sandbox confines what passes."`
	Agents     `group:"agents" section:"Sub-agents" doc:"spawn, workflow_run and send_message, offered only when LLM_BASE_URL and LLM_MODEL are set."`
	Replicas   `group:"replicas" section:"Replicas" doc:"Several toolsvc processes behind one load balancer: the shared PostgreSQL database for sub-agent tasks and conversations, and how replicas name themselves and take over each other's dead tasks. See docs/replicas.md."`
	Traces     `group:"traces" section:"Traces" doc:"OpenTelemetry traces of calls, sent over OTLP/HTTP. See docs/traces.md."`
	Channels   `group:"channels" section:"Chat channels" doc:"send_media, offered when at least one channel is configured. Each account variable holds one value (the account \"default\") or name=value pairs separated by commas, one per account; the other variables of an account name it the same way."`
}

// Secret is one secret value. It never prints it.
type Secret string

// String hides the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[hidden]"
}

// DefaultAccount is the account of a per-account variable given one value.
const DefaultAccount = "default"

// Account is one value of a per-account variable.
type Account struct{ Name, Value string }

// Accounts is a per-account variable: one value, which is the account
// "default"'s, or name=value pairs separated by commas. A value whose part
// before "=" is no account name (a URL with a query) is taken whole.
type Accounts []Account

// accountName is what an account may be called.
var accountName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`) })

// Decode implements Decoder.
func (a *Accounts) Decode(v string) error {
	var out Accounts
	for _, f := range splitList(v, ",") {
		name, val, ok := strings.Cut(f, "=")
		if !ok || !accountName().MatchString(strings.TrimSpace(name)) {
			name, val = DefaultAccount, f
		}
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		if _, dup := out.Lookup(name); dup {
			return fmt.Errorf("account %q is given twice", name)
		}
		out = append(out, Account{Name: name, Value: val})
	}
	*a = out
	return nil
}

// Lookup returns the value of account name.
func (a Accounts) Lookup(name string) (string, bool) {
	for _, x := range a {
		if x.Name == name {
			return x.Value, true
		}
	}
	return "", false
}

// Names lists the accounts.
func (a Accounts) Names() []string {
	out := make([]string, len(a))
	for i, x := range a {
		out[i] = x.Name
	}
	return out
}

// SecretAccounts is a per-account variable of secrets (tokens, webhook
// URLs). It never prints them; SecretValues collects them for redaction.
type SecretAccounts []Account

// Decode implements Decoder.
func (s *SecretAccounts) Decode(v string) error {
	var a Accounts
	if err := a.Decode(v); err != nil {
		return err
	}
	*s = SecretAccounts(a)
	return nil
}

// Lookup returns the value of account name.
func (s SecretAccounts) Lookup(name string) (string, bool) { return Accounts(s).Lookup(name) }

// Names lists the accounts.
func (s SecretAccounts) Names() []string { return Accounts(s).Names() }

// String hides the values.
func (s SecretAccounts) String() string { return fmt.Sprintf("[%d hidden]", len(s)) }

// Bytes is an amount of memory: a number of bytes, or a number with KiB,
// MiB or GiB (K, M, G, KB, MB and GB mean the same).
type Bytes int64

// Decode implements Decoder.
func (b *Bytes) Decode(v string) error {
	s := strings.ToUpper(strings.TrimSpace(v))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	// The errors say only what is wrong with a number: the caller's
	// message names the setting and shows the form expected.
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return err
	case n < 0:
		return errors.New("it is negative")
	case n > (1<<62)/mult:
		return errors.New("it is too large")
	}
	*b = Bytes(n * mult)
	return nil
}

// List is a comma-separated list of plain values.
type List []string

// Decode implements Decoder.
func (l *List) Decode(v string) error {
	*l = splitList(v, ",")
	return nil
}

// Patterns is a list of regular expressions, one per line, or separated by
// commas when the value has no newline.
type Patterns []string

// Decode implements Decoder; every pattern must compile.
func (p *Patterns) Decode(v string) error {
	sep := ","
	if strings.Contains(v, "\n") {
		sep = "\n"
	}
	list := splitList(v, sep)
	for _, pat := range list {
		if _, err := regexp.Compile(pat); err != nil {
			return fmt.Errorf("invalid pattern %q: %w", pat, err)
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
// error names the variable at fault; a TOOLSVC_* variable that is no
// setting (a typo) stops it too, with the nearest name.
func Load() (Config, error) {
	if err := CheckNames(os.Environ()); err != nil {
		return Config{}, err
	}
	return LoadFrom(os.LookupEnv)
}

// CheckFolders refuses a data folder inside the workspace, a workspace
// inside the data folder, and the two being one folder, after resolving
// symbolic links (of the parts that exist so far). Tools work in the
// workspace, so they could otherwise read or rewrite the audit log, or the
// service's own files could land among the model's.
func (c Server) CheckFolders() error {
	ws, err := resolvePath(c.Workspace)
	if err != nil {
		return fmt.Errorf("%s_WORKSPACE: %w", Prefix, err)
	}
	data, err := resolvePath(c.DataDir)
	if err != nil {
		return fmt.Errorf("%s_DATA_DIR: %w", Prefix, err)
	}
	var how string
	switch {
	case ws == data:
		how = "is the workspace"
	case pathx.Contains(ws, data):
		how = "is inside the workspace"
	case pathx.Contains(data, ws):
		how = "contains the workspace"
	default:
		return nil
	}
	return fmt.Errorf("%s_DATA_DIR: %s (%s) %s (%s): tools could read and change the audit log. Next: choose a data folder outside the workspace, e.g. a sibling folder", Prefix, c.DataDir, data, how, ws)
}

// resolvePath makes p absolute and resolves the symbolic links in the
// longest part of it that exists; the missing rest is appended as is.
func resolvePath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for {
		resolved, err := filepath.EvalSymlinks(abs)
		if err == nil {
			return filepath.Join(resolved, rest), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(abs)
		if parent == abs {
			return filepath.Join(abs, rest), nil
		}
		rest = filepath.Join(filepath.Base(abs), rest)
		abs = parent
	}
}

// validCIDR accepts what netguard.ParseCIDR accepts: a CIDR or one IP
// address without a zone.
func validCIDR(v string) bool {
	if strings.Contains(v, "/") {
		_, err := netip.ParsePrefix(v)
		return err == nil
	}
	ip, err := netip.ParseAddr(v)
	return err == nil && ip.Zone() == ""
}

// validOrigin accepts "*", "null" or scheme://host[:port] with nothing
// after it, as a browser sends it in the Origin header.
func validOrigin(o string) bool {
	if o == "*" || o == "null" {
		return true
	}
	u, err := url.Parse(strings.TrimSuffix(o, "/"))
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		u.User == nil && u.Path == "" && u.RawQuery == "" && u.Fragment == ""
}

// validHostName accepts an IP address (IPv6 with or without brackets) or
// a DNS name, optionally starting with "*." and ending with a dot: what a
// Host header names, without its port.
func validHostName(h string) bool {
	if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); err == nil {
		return ip.Zone() == "" && (strings.HasPrefix(h, "[") == strings.HasSuffix(h, "]"))
	}
	name := strings.TrimSuffix(strings.TrimPrefix(h, "*."), ".")
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") ||
			strings.Trim(strings.ToLower(label), "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return false
		}
	}
	return true
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// SecretValues returns every secret the service holds, for redaction: the
// API keys, the values of the Config fields of type Secret or whose variable is named
// like a secret (redact.SecretVariable: *_KEY, *_TOKEN, *_SECRET,
// *_PASSWORD...), and of every TOOLSVC_* variable so named in the
// environment, including ones this struct does not know (read by other
// parts, or added later). A comma-separated value also counts piece by piece.
func (c Config) SecretValues() []string {
	return c.secretValues(os.Environ())
}

func (c Config) secretValues(environ []string) []string {
	var out []string
	add := func(v string) {
		if v = strings.TrimSpace(v); v == "" {
			return
		}
		out = append(out, v)
		if strings.Contains(v, ",") {
			out = append(out, splitList(v, ",")...)
		}
	}
	v := reflect.ValueOf(c)
	for _, s := range settings() {
		fv := v.FieldByIndex(s.index)
		if keys, ok := fv.Interface().(APIKeys); ok {
			for _, k := range keys {
				add(k.Key)
			}
			continue
		}
		if sa, ok := fv.Interface().(SecretAccounts); ok {
			for _, a := range sa {
				add(a.Value)
				for _, part := range urlSecrets(a.Value) {
					add(part)
				}
			}
			continue
		}
		if s.Type != reflect.TypeFor[Secret]() && !redact.SecretVariable(s.Name) {
			continue
		}
		switch fv.Kind() {
		case reflect.String:
			add(fv.String())
			// A database URL's password is cut on its own too: a driver's
			// error may quote it without the rest of the URL.
			for _, part := range urlSecrets(fv.String()) {
				add(part)
			}
		case reflect.Slice:
			if fv.Type().Elem().Kind() == reflect.String {
				for j := 0; j < fv.Len(); j++ {
					add(fv.Index(j).String())
				}
			}
		}
	}
	for _, kv := range environ {
		k, val, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(k, Prefix+"_") && redact.SecretVariable(k) {
			add(val)
		}
		if ok && otlpHeaders(k) {
			for _, h := range otlpHeaderValues(val) {
				add(h)
			}
		}
	}
	return out
}

// otlpHeaders reports whether the variable named k holds the headers the
// trace exporter sends (the OpenTelemetry SDK reads them itself): an
// Authorization or API key header of a tracing vendor.
func otlpHeaders(k string) bool {
	return k == "OTEL_EXPORTER_OTLP_HEADERS" || k == "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
}

// otlpHeaderValues returns the values of the headers in an
// OTEL_EXPORTER_OTLP_HEADERS value (key=value pairs separated by commas,
// values percent-encoded), as written and decoded, and the part after a
// scheme ("Bearer x" gives x too).
func otlpHeaderValues(v string) []string {
	var out []string
	for _, pair := range strings.Split(v, ",") {
		_, val, ok := strings.Cut(pair, "=")
		if val = strings.TrimSpace(val); !ok || val == "" {
			continue
		}
		out = append(out, val)
		if dec, err := url.QueryUnescape(val); err == nil && dec != val {
			out = append(out, dec)
			val = dec
		}
		if _, token, ok := strings.Cut(val, " "); ok && len(token) >= 8 {
			out = append(out, token)
		}
	}
	return out
}

// urlSecrets returns the parts of a secret URL that are secrets by
// themselves: query values (WeCom's key=) and long path segments (the token
// of a Discord or Slack webhook), so that an answer quoting only the token
// is redacted too.
func urlSecrets(v string) []string {
	u, err := url.Parse(v)
	if err != nil || u.Host == "" {
		return nil
	}
	var out []string
	for _, vals := range u.Query() {
		for _, q := range vals {
			if len(q) >= 8 {
				out = append(out, q)
			}
		}
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if len(seg) >= 16 {
			out = append(out, seg)
		}
	}
	if u.User != nil {
		out = append(out, u.User.String())
	}
	return out
}

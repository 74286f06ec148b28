// Package childenv builds the environment of the programs toolsvc starts
// (exec's commands, command tools, stdio MCP servers) from an allowlist:
// the service's own variables (API keys, tokens, TOOLSVC_*) never reach
// them.
package childenv

import "strings"

// DefaultPath is the PATH a child gets when the service has none.
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Allowed reports whether the service's variable name may reach a child:
// PATH, the locale, TZ and TERM, and the names of extra (a trailing *
// matches a prefix). TOOLSVC_* never does, nor HOME and TMPDIR, which the
// caller sets to the child's own folders.
func Allowed(name string, extra []string) bool {
	if strings.HasPrefix(name, "TOOLSVC_") || name == "HOME" || name == "TMPDIR" {
		return false
	}
	switch name {
	case "PATH", "LANG", "LANGUAGE", "TZ", "TERM":
		return true
	}
	if strings.HasPrefix(name, "LC_") {
		return true
	}
	for _, a := range extra {
		if a == name || (strings.HasSuffix(a, "*") && strings.HasPrefix(name, strings.TrimSuffix(a, "*"))) {
			return true
		}
	}
	return false
}

// From returns the entries of environ (NAME=value) that Allowed admits,
// leaving out the names own sets itself (nil: none), and DefaultPath when
// neither environ nor own gives a PATH.
func From(environ, extra []string, own func(name string) bool) []string {
	var out []string
	hasPath := own != nil && own("PATH")
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || !Allowed(name, extra) || (own != nil && own(name)) {
			continue
		}
		hasPath = hasPath || name == "PATH"
		out = append(out, kv)
	}
	if !hasPath {
		out = append(out, DefaultPath)
	}
	return out
}

package shellguard

import (
	"path"
	"strings"
)

const reasonBashEnv = "setting BASH_ENV makes every bash started later run that file first, which cannot be checked"

// commandVars are environment variables whose value programs run as a
// command (most through the shell): git's ssh, editor, pager and diff
// programs, editors, pagers, askpass helpers, less's input filters.
var commandVars = map[string]bool{
	"GIT_SSH_COMMAND": true, "GIT_SSH": true, "GIT_EDITOR": true, "GIT_SEQUENCE_EDITOR": true,
	"GIT_PAGER": true, "GIT_EXTERNAL_DIFF": true, "GIT_ASKPASS": true, "GIT_PROXY_COMMAND": true,
	"SSH_ASKPASS": true, "SUDO_ASKPASS": true, "EDITOR": true, "VISUAL": true, "FCEDIT": true,
	"PAGER": true, "MANPAGER": true, "SYSTEMD_PAGER": true, "BROWSER": true,
	"LESSOPEN": true, "LESSCLOSE": true, "PROMPT_COMMAND": true,
}

// envVar judges setting the variable name to val, as a prefix assignment
// (target holds the words of the command it is set for), as a plain
// assignment or export (target is nil), or through env or sudo.
//
//   - In allowlist mode, any variable that loads code is refused.
//   - BASH_ENV is refused in every form: bash runs the file it names
//     before any non-interactive script, so `BASH_ENV=./x bash -c true`
//     and every later `bash` would run unseen code.
//   - ENV (read by interactive sh, dash, ksh) is refused when its value is
//     anything but a plain word, or when it is set for a command line that
//     starts a shell; `ENV=prod make` passes.
//   - Variables whose value is a command (GIT_SSH_COMMAND, GIT_PAGER,
//     EDITOR...) have that value judged as a script; TAR_OPTIONS is judged
//     as tar options; GIT_CONFIG_KEY_n may not name a setting that runs
//     commands, and GIT_CONFIG_PARAMETERS is refused.
func (c *checker) envVar(name string, val word, target []word, cmd string, sc scope) *Blocked {
	if sc.mode == modeScript && c.g.AllowlistMode() && codeLoadingVar(name) {
		return block(cmd, "setting "+name+" is not allowed in allowlist mode (it can make an allowed command run other code)")
	}
	switch {
	case name == "BASH_ENV":
		return block(cmd, reasonBashEnv)
	case name == "ENV":
		if !plainWord(val) {
			return block(cmd, "setting ENV to a path makes an interactive shell run that file, which cannot be checked")
		}
		for _, w := range target {
			if w.lit && shells[path.Base(w.text)] {
				return block(cmd, "setting ENV for a shell makes it run that file, which cannot be checked")
			}
		}
	case commandVars[name]:
		if !val.lit && sc.mode == modeScript && val.prefix == "" && strings.TrimSpace(strings.ReplaceAll(maskedText(val), string(computedMark), "")) == "" {
			return block(cmd, "the command in "+name+" is computed at run time")
		}
		script := val.text
		if name == "LESSOPEN" || name == "LESSCLOSE" {
			script = strings.TrimLeft(script, "|-")
		}
		inner := scope{depth: sc.depth + 1, mode: sc.mode}
		if !val.lit {
			inner.mode = modeCode // the literal parts are judged by the deny rules
		}
		if b := c.script(script, inner); b != nil {
			b.Reason += " (in " + name + ")"
			return b
		}
	case name == "TAR_OPTIONS":
		return c.tarOptionsVar(val, cmd, sc)
	case strings.HasPrefix(name, "GIT_CONFIG_KEY_"):
		if !val.lit {
			if sc.mode == modeScript {
				return block(cmd, "a git setting named at run time could run commands")
			}
			return nil
		}
		if gitRiskyKey(val.text) {
			return block(cmd, "git setting "+val.text+" given through the environment can run commands, which cannot be checked")
		}
	case name == "GIT_CONFIG_PARAMETERS":
		return block(cmd, "GIT_CONFIG_PARAMETERS can hold git settings that run commands, which cannot be checked")
	}
	return nil
}

// plainWord reports whether w is empty or a literal of letters, digits,
// '-' and '_' only (not a path).
func plainWord(w word) bool {
	if !w.lit {
		return false
	}
	for _, r := range w.text {
		if !(r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// assignedValue is the value of a NAME=VALUE word given to env or sudo.
func assignedValue(w word) word {
	_, val, _ := strings.Cut(w.text, "=")
	if w.lit {
		return litWord(val)
	}
	v := word{text: val}
	if i := strings.IndexByte(w.prefix, '='); i >= 0 {
		v.prefix = w.prefix[i+1:]
	}
	if m := w.masked; m != "" {
		if i := strings.IndexByte(m, '='); i >= 0 {
			v.masked = m[i+1:]
		}
	}
	return v
}

package shellguard

import (
	"regexp"
	"slices"
	"strings"
	"sync"
)

// gitCommandKeys are git configuration keys whose value git runs as a
// shell command (alias.* and credential helpers only when it starts
// with '!').
var gitCommandKeys = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:core\.(?:pager|editor|sshcommand|fsmonitor|askpass)|diff\.external|diff\..+\.(?:command|textconv)|(?:diff|merge)tool\..+\.cmd|merge\..+\.driver|filter\..+\.(?:clean|smudge|process)|sequence\.editor|gpg(?:\..+)?\.program|pager\..+|uploadpack\.packobjectshook|credential(?:\..+)?\.helper|alias\..+|browser\..+\.cmd|web\.browser|remote\..+\.(?:uploadpack|receivepack)|sendemail\.(?:tocmd|cccmd)|core\.gitproxy)$`)
})

// gitRiskyKey reports whether setting key can make git run code: a key
// whose value is a command, the hooks folder, an included configuration
// file, or enabling the ext:: transport.
func gitRiskyKey(key string) bool {
	k := strings.ToLower(key)
	return gitCommandKeys().MatchString(k) || k == "core.hookspath" || k == "include.path" ||
		strings.HasPrefix(k, "includeif.") && strings.HasSuffix(k, ".path") ||
		k == "protocol.allow" || k == "protocol.ext.allow"
}

// gitCommandOpts are subcommand options whose value git runs as a command
// (the local transport runs --upload-pack through the shell; rebase --exec,
// archive --exec, push --exec...).
var gitCommandOpts = []string{"upload-pack", "receive-pack", "exec", "extcmd"}

// gitFilterOpts are the filter-branch options whose value is a script.
var gitFilterOpts = map[string]bool{
	"env-filter": true, "tree-filter": true, "index-filter": true, "parent-filter": true,
	"msg-filter": true, "commit-filter": true, "tag-name-filter": true,
}

// git judges the shell commands hidden in git's command line: settings
// given with -c or --config-env, `git config` values, options whose value
// is a command (--upload-pack, rebase -x, difftool -x, filter-branch
// filters...), subcommands that run a command (submodule foreach, bisect
// run) and ext:: URLs.
func (c *checker) git(ws []word, sc scope, cc callCtx) *Blocked {
	text := joinWords(ws)
	i, b := c.gitGlobalOpts(ws, text, sc)
	if b != nil || i >= len(ws) {
		return b
	}
	sub, args := ws[i].text, ws[i+1:]
	if b := c.gitArgs(sub, args, text, sc, cc); b != nil {
		return b
	}
	if rule, ok := gitSubcommands[sub]; ok {
		return rule(c, args, sc, cc)
	}
	return nil
}

// gitGlobalOpts judges the options before git's subcommand and returns the
// subcommand's index.
func (c *checker) gitGlobalOpts(ws []word, text string, sc scope) (int, *Blocked) {
	i := 1
	for ; i < len(ws) && ws[i].lit && strings.HasPrefix(ws[i].text, "-"); i++ {
		switch s := ws[i].text; {
		case s == "-c" && i+1 < len(ws):
			i++
			if b := c.gitSetting(ws[i], text, sc); b != nil {
				return i, b
			}
		case s == "--config-env" || strings.HasPrefix(s, "--config-env="):
			spec, ok := strings.CutPrefix(s, "--config-env=")
			if !ok && i+1 < len(ws) {
				i++
				spec = ws[i].text
			}
			key, _, _ := strings.Cut(spec, "=")
			if gitRiskyKey(key) && sc.mode == modeScript {
				return i, block(text, "git --config-env takes a setting that runs commands ("+key+") from the environment, which cannot be checked")
			}
		case strings.HasPrefix(s, "--exec-path="):
			return i, block(text, "git --exec-path=DIR runs git's own commands from DIR, which cannot be checked")
		case s == "-C" || s == "--git-dir" || s == "--work-tree" || s == "--namespace" || s == "--super-prefix" || s == "--list-cmds":
			i++
		}
	}
	return i, nil
}

// gitSetting judges the KEY=VALUE of git -c.
func (c *checker) gitSetting(w word, text string, sc scope) *Blocked {
	if !w.lit {
		key, _, hasEq := strings.Cut(w.prefix, "=")
		if sc.mode == modeScript && (!hasEq || gitRiskyKey(key)) {
			return block(text, "a git setting that runs commands is computed at run time")
		}
		return nil
	}
	key, val, _ := strings.Cut(w.text, "=")
	return c.gitValue(key, litWord(val), sc)
}

// gitArgs judges the subcommand's arguments that give git a command: an
// option's value, or an ext:: URL.
func (c *checker) gitArgs(sub string, args []word, text string, sc scope, cc callCtx) *Blocked {
	for k := 0; k < len(args); k++ {
		w := args[k]
		switch {
		case !w.lit:
			if sc.mode == modeScript && gitComputedCommand(w.prefix, sub) {
				return block(text, "the command git runs is computed at run time")
			}
		case w.text == "-m" || w.text == "--message" || w.text == "-F" || w.text == "--file":
			k++ // a commit message or a file is data
		case strings.HasPrefix(w.text, "ext::"):
			if b := c.gitExt(w.text[len("ext::"):], sc, cc); b != nil {
				return b
			}
		default:
			var value *word
			value, k = gitCommandValue(sub, args, k)
			if value == nil {
				continue
			}
			if b := c.gitScript(*value, text, sc); b != nil {
				return b
			}
		}
	}
	return nil
}

// gitCommandValue returns the command that the option at args[k] gives
// git, or nil, and the index of the last word the option used.
func gitCommandValue(sub string, args []word, k int) (*word, int) {
	s := args[k].text
	next := func() (*word, int) {
		if k+1 < len(args) {
			return &args[k+1], k + 1
		}
		return nil, k
	}
	switch {
	case strings.HasPrefix(s, "--"):
		name, val, eq := strings.Cut(s[2:], "=")
		if !gitCommandOpt(name, sub, eq) {
			return nil, k
		}
		if eq {
			v := litWord(val)
			return &v, k
		}
		return next()
	case s == "-x" && (sub == "rebase" || sub == "difftool"), s == "-u" && (sub == "clone" || sub == "ls-remote"):
		return next()
	case strings.HasPrefix(s, "-O") && len(s) > 2 && sub == "grep":
		v := litWord(s[2:])
		return &v, k
	}
	return nil, k
}

// gitCommandOpt reports whether the long option name (perhaps
// abbreviated) of subcommand sub takes a command; hasValue says whether
// the value was attached with '='.
func gitCommandOpt(name, sub string, hasValue bool) bool {
	if gitFilterOpts[name] && sub == "filter-branch" || name == "open-files-in-pager" && hasValue {
		return true
	}
	for _, long := range gitCommandOpts {
		if len(name) >= 3 && prefixOf(name, long) {
			return true
		}
	}
	return false
}

// gitSubcommands judge the git subcommands that run commands or settings.
var gitSubcommands = map[string]func(c *checker, args []word, sc scope, cc callCtx) *Blocked{
	"config":    (*checker).gitConfig,
	"submodule": (*checker).gitSubmodule,
	"bisect":    (*checker).gitBisect,
}

// gitConfig judges any setting followed by a value, wherever the options
// put them (git config --file f key value, git config set key value).
func (c *checker) gitConfig(args []word, sc scope, _ callCtx) *Blocked {
	var ops []word
	for _, w := range args {
		if w.lit && strings.HasPrefix(w.text, "-") {
			continue
		}
		ops = append(ops, w)
	}
	for k := 0; k+1 < len(ops); k++ {
		if ops[k].lit && gitRiskyKey(ops[k].text) {
			if b := c.gitValue(ops[k].text, ops[k+1], sc); b != nil {
				return b
			}
		}
	}
	return nil
}

// gitSubmodule judges git submodule [--quiet] foreach [--recursive] <command>.
func (c *checker) gitSubmodule(args []word, sc scope, _ callCtx) *Blocked {
	k := slices.IndexFunc(args, func(w word) bool { return w.lit && w.text == "foreach" })
	if k < 0 {
		return nil
	}
	rest := args[k+1:]
	for len(rest) > 0 && rest[0].lit && strings.HasPrefix(rest[0].text, "-") {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		return nil
	}
	return c.joinedScript(rest, "git submodule foreach", sc)
}

// gitBisect judges the command of git bisect run.
func (c *checker) gitBisect(args []word, sc scope, cc callCtx) *Blocked {
	if len(args) > 1 && args[0].lit && args[0].text == "run" {
		return c.command(args[1:], sc, cc.inner())
	}
	return nil
}

// gitComputedCommand reports whether a computed word with this literal
// start gives git a command: --upload-pack="$X", ext::"$X".
func gitComputedCommand(prefix, sub string) bool {
	if strings.HasPrefix(prefix, "ext::") {
		return true
	}
	name, _, eq := strings.Cut(strings.TrimPrefix(prefix, "--"), "=")
	if !eq || !strings.HasPrefix(prefix, "--") {
		return false
	}
	return gitCommandOpt(name, sub, true)
}

// gitScript judges the value of a git option that git runs as a command.
func (c *checker) gitScript(v word, text string, sc scope) *Blocked {
	if !v.lit {
		if sc.mode == modeCode {
			return nil
		}
		return block(text, "the command git runs is computed at run time")
	}
	if b := c.script(v.text, scope{depth: sc.depth + 1, mode: sc.mode}); b != nil {
		b.Reason += " (run by git)"
		return b
	}
	return nil
}

// gitExt judges the command of an ext:: URL: words split at spaces, with
// "% " standing for a space and "%%" for a percent sign.
func (c *checker) gitExt(cmd string, sc scope, cc callCtx) *Blocked {
	var ws []word
	var sb strings.Builder
	flush := func() {
		if sb.Len() > 0 {
			ws = append(ws, litWord(sb.String()))
			sb.Reset()
		}
	}
	for k := 0; k < len(cmd); k++ {
		switch {
		case cmd[k] == '%' && k+1 < len(cmd) && (cmd[k+1] == ' ' || cmd[k+1] == '%'):
			k++
			sb.WriteByte(cmd[k])
		case cmd[k] == ' ':
			flush()
		default:
			sb.WriteByte(cmd[k])
		}
	}
	flush()
	if b := c.command(ws, sc, cc.inner()); b != nil {
		b.Reason += " (in a git ext:: URL)"
		return b
	}
	return nil
}

// gitValue judges the value of a git setting when git runs it, and
// refuses the settings that make git run code it cannot show: a hooks
// folder, an included file, the ext:: transport.
func (c *checker) gitValue(key string, val word, sc scope) *Blocked {
	k := strings.ToLower(key)
	if !gitRiskyKey(k) {
		return nil
	}
	if !val.lit {
		if sc.mode == modeCode {
			return nil
		}
		return block("git "+key+"="+val.text, "a git setting that runs commands is computed at run time")
	}
	cmd := "git " + key + "=" + val.text
	switch {
	case k == "core.hookspath":
		if val.text == "/dev/null" || val.text == "" {
			return nil // disables hooks
		}
		return block(cmd, "core.hooksPath makes git run the hooks in that folder, which cannot be checked")
	case k == "include.path" || strings.HasPrefix(k, "includeif."):
		return block(cmd, "including a git configuration file can make git run commands, which cannot be checked")
	case k == "protocol.allow" || k == "protocol.ext.allow":
		if v := strings.ToLower(val.text); v == "always" || v == "user" && k == "protocol.ext.allow" {
			return block(cmd, "enabling git's ext:: transport lets a URL run any command")
		}
		return nil
	}
	script := val.text
	if strings.HasPrefix(k, "alias.") || strings.HasPrefix(k, "credential") {
		var ok bool
		if script, ok = strings.CutPrefix(script, "!"); !ok {
			return nil // a git subcommand, or a credential helper program name
		}
	}
	return c.script(script, scope{depth: sc.depth + 1, mode: sc.mode})
}

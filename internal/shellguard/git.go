package shellguard

import (
	"regexp"
	"strings"
)

// gitCommandKeys are git configuration keys whose value git runs as a
// shell command (alias.* and credential helpers only when it starts
// with '!').
var gitCommandKeys = regexp.MustCompile(`^(?:core\.(?:pager|editor|sshcommand|fsmonitor|askpass)|diff\.external|diff\..+\.(?:command|textconv)|(?:diff|merge)tool\..+\.cmd|merge\..+\.driver|filter\..+\.(?:clean|smudge|process)|sequence\.editor|gpg(?:\..+)?\.program|pager\..+|uploadpack\.packobjectshook|credential(?:\..+)?\.helper|alias\..+|browser\..+\.cmd|web\.browser)$`)

// git judges the shell commands hidden in git configuration given on the
// command line: `git -c core.pager='...' log`, `git config alias.x '!...'`.
func (c *checker) git(ws []word, sc scope) *Blocked {
	i := 1
	for i < len(ws) && ws[i].lit && strings.HasPrefix(ws[i].text, "-") {
		switch s := ws[i].text; {
		case s == "-c" && i+1 < len(ws):
			i++
			w := ws[i]
			if !w.lit {
				key, _, hasEq := strings.Cut(w.prefix, "=")
				if sc.mode == modeScript && (!hasEq || gitCommandKeys.MatchString(strings.ToLower(key))) {
					return block(joinWords(ws), "a git setting that runs commands is computed at run time")
				}
				break
			}
			key, val, _ := strings.Cut(w.text, "=")
			if b := c.gitValue(key, litWord(val), sc); b != nil {
				return b
			}
		case s == "-C" || s == "--git-dir" || s == "--work-tree" || s == "--namespace" || s == "--exec-path" || s == "--config-env":
			i++
		}
		i++
	}
	if i < len(ws) && ws[i].lit && ws[i].text == "config" {
		ops := []word{}
		for _, w := range ws[i+1:] {
			if w.lit && strings.HasPrefix(w.text, "-") {
				continue
			}
			ops = append(ops, w)
		}
		if len(ops) >= 2 && ops[0].lit {
			return c.gitValue(ops[0].text, ops[1], sc)
		}
	}
	return nil
}

// gitValue judges the value of a git setting when git runs it.
func (c *checker) gitValue(key string, val word, sc scope) *Blocked {
	k := strings.ToLower(key)
	if !gitCommandKeys.MatchString(k) {
		return nil
	}
	if !val.lit {
		if sc.mode == modeCode {
			return nil
		}
		return block("git "+key+"="+val.text, "a git setting that runs commands is computed at run time")
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

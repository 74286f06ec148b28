package shellguard

import (
	"regexp"
	"strings"
	"sync"
)

// rule is a built-in regex with the reason shown when it matches. The rule
// lists are compiled on first use (sync.OnceValue): about thirty patterns,
// one with a counted repetition, cost milliseconds at every start of the
// program, which needs them only once a command is checked.
type rule struct {
	re     *regexp.Regexp
	reason string
	kw     string // a literal every match contains; the regex is skipped without it
}

// cmdStart anchors a pattern where a command can begin in shell text: the
// start of the text or a line, or after ; & | ( { or a backtick. Anchoring
// keeps quoted data such as `echo "rm -rf /"` from matching, while the
// structural checks on the parsed script catch every real spelling.
const cmdStart = "(?:^|[\\n;&|({`])\\s*"

// seedRules are CountBot's DANGEROUS_PATTERNS, matched against the raw
// script (a seatbelt for what the parser may misread), anchored where a
// command can start.
var seedRules = sync.OnceValue(func() []rule { return seed(cmdStart) })

// seedCmdRules are the same patterns matched against the normalised text
// of one simple command, anchored at its start: `echo rm -rf /` is data.
var seedCmdRules = sync.OnceValue(func() []rule { return seed("^") })

func seed(anchor string) []rule {
	return []rule{
		{re: regexp.MustCompile(anchor + `rm\s+-rf\s+/`), reason: "recursive or forced rm is not allowed", kw: "rm"},
		{re: regexp.MustCompile(anchor + `mkfs`), reason: "formatting a file system is not allowed", kw: "mkfs"},
		{re: regexp.MustCompile(anchor + `dd\s+if=`), reason: "dd if= (raw disk copy) is not allowed", kw: "if="},
		{re: regexp.MustCompile(`:\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;?\s*:`), reason: "fork bomb", kw: ":()"},
		{re: regexp.MustCompile(`>\s*/dev/(?:sd|hd|nvme|mmcblk|vd|xvd)`), reason: "writing to a raw disk device is not allowed", kw: "/dev/"},
	}
}

// strictRules are matched without anchors against text that is not a
// parsed shell script: inline interpreter code (python3 -c, perl -e...) and
// scripts the parser rejected. Such text cannot be told apart from data, so
// these err on the side of refusing.
var strictRules = sync.OnceValue(func() []rule {
	return []rule{
		{re: regexp.MustCompile(`\brm\s+(?:[^\s;&|]+\s+)*?(?:-[a-zA-Z]*[rRf]|--(?:r|f|no-p)[a-z-]*)`), reason: "recursive or forced rm is not allowed"},
		{re: regexp.MustCompile(`\b(?:mkfs[\w.]*|mke2fs|mkswap|wipefs|mkdosfs|mkntfs)\b`), reason: "formatting a file system is not allowed"},
		{re: regexp.MustCompile(`\bdd\s+(?:\S+\s+)*?if=`), reason: "dd if= (raw disk copy) is not allowed"},
		{re: regexp.MustCompile(`\bshred\b`), reason: "shred is not allowed"},
		{re: regexp.MustCompile(`\bfind\b[^\n;|&]*\s-delete\b`), reason: "find -delete is not allowed"},
		{re: regexp.MustCompile(`/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|dm-\d|md\d|mapper/|disk/)`), reason: "raw disk devices must not be read or written"},
		{re: regexp.MustCompile(`:\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}`), reason: "fork bomb"},
		{re: regexp.MustCompile(`(?s)\b(?:while|for)\b.{0,200}\bfork\s*\(`), reason: "a process-spawning loop (fork bomb) is not allowed"},
		{re: regexp.MustCompile(`\b(?:shutil\.rmtree|rmtree|remove_tree|rm_rf|rm_r|removedirs)\b`), reason: "recursive deletion in inline code is not allowed"},
		{re: regexp.MustCompile(`\b(?:rmSync|rmdirSync|rimraf)\b|\bfs(?:\.promises)?\.rm(?:dir)?\s*\(`), reason: "recursive deletion in inline code is not allowed"},
		{re: regexp.MustCompile(`\bos\.(?:walk|scandir|listdir)\s*\(\s*(?:r?['"]/['"]|Path\(\s*r?['"]/['"]\s*\))`), reason: "walking the root file system in inline code is not allowed"},
		{re: regexp.MustCompile(`\bkill\s+(?:-\w+\s+)*-1\b`), reason: "kill -1 (every process) is not allowed"},
		{re: regexp.MustCompile(`(?i)\bformat\s+[a-z]:`), reason: "format is not allowed"},
		{re: regexp.MustCompile(`(?i)\b(?:Remove-Item|rm|del|ri|rmdir|rd)\b[^\n;|]*\s-(?:r|recurse|fo|force)\b`), reason: "recursive or forced deletion is not allowed"},
		{re: regexp.MustCompile(`(?i)\b(?:Stop-Computer|Restart-Computer|Format-Volume|Clear-Disk)\b`), reason: "shutting down or formatting is not allowed"},
		{re: regexp.MustCompile(`(?i)\b(?:del|erase)\s+(?:\S+\s+)*?/[fsq]\b`), reason: "del /f is not allowed"},
		{re: regexp.MustCompile(`(?i)\b(?:rmdir|rd)\s+(?:\S+\s+)*?/s\b`), reason: "rmdir /s is not allowed"},
	}
})

// unparsedRules are added to strictRules for scripts the parser rejected:
// there, words like shutdown cannot be told from data either.
var unparsedRules = sync.OnceValue(func() []rule {
	return []rule{
		{re: regexp.MustCompile(`\b(?:shutdown|reboot|halt|poweroff|telinit)\b`), reason: "shutting down or rebooting the machine is not allowed"},
		{re: regexp.MustCompile(`\binit\s+[0-6sS]\b`), reason: "changing the run level is not allowed"},
		{re: regexp.MustCompile(`\bsystemctl\s+(?:\S+\s+)*?(?:poweroff|reboot|halt|kexec)\b`), reason: "shutting down or rebooting the machine is not allowed"},
	}
})

// squash removes quotes and backslashes so that r\m, 'r”m' and "rm" read
// as rm in text the parser could not read.
func squash(s string) string {
	return strings.NewReplacer(`\`, "", `'`, "", `"`, "").Replace(s)
}

// matchRules returns the reason of the first rule matching text.
func matchRules(rules []rule, text string) (string, bool) {
	for _, r := range rules {
		if r.kw != "" && !strings.Contains(text, r.kw) {
			continue
		}
		if r.re.MatchString(text) {
			return r.reason, true
		}
	}
	return "", false
}

package shellguard

import (
	"path"
	"regexp"
	"strings"
	"sync"
)

// callCtx is how a command was reached.
type callCtx struct {
	wrappers int  // wrapper commands around it
	xargs    bool // more arguments are appended from input at run time (xargs)
	noScan   bool // do not scan the arguments for further commands
}

func (cc callCtx) inner() callCtx { return callCtx{wrappers: cc.wrappers + 1, noScan: cc.noScan} }

const reasonRecursiveRm = "recursive or forced rm is not allowed"

// command judges one simple command given as decoded words: deny patterns
// and rules, then what it starts (wrappers, shells, interpreters), then the
// allowlist.
func (c *checker) command(ws []word, sc scope, cc callCtx) *Blocked {
	if len(ws) == 0 {
		return nil
	}
	text := joinWords(ws)
	if b := c.denyPatterns(text, text); b != nil {
		return b
	}
	if reason, ok := matchRules(seedCmdRules(), text); ok {
		return block(text, reason)
	}
	for _, w := range ws {
		if diskDevice(w.text) {
			return block(text, "raw disk devices must not be read or written")
		}
	}
	name := ws[0]
	if !name.lit {
		if sc.mode == modeCode {
			return nil
		}
		return block(text, reasonComputed)
	}
	if cc.wrappers > maxWrappers {
		return block(text, "too many nested wrapper commands")
	}
	base := c.progBase(name.text)
	if reason := rules(base, ws, cc); reason != "" {
		if base != path.Base(name.text) {
			reason += " (" + name.text + " is a copy of " + base + " made by this command)"
		}
		return block(text, reason)
	}
	c.noteCopy(base, ws)
	handled, transparent, b := c.launcher(base, ws, sc, cc)
	if b != nil {
		return b
	}
	if _, isWrapper := wrappers[base]; isWrapper && handled && !cc.noScan {
		// Misreading a wrapper's options must not hide the command it
		// starts: every later word (among the first maxScan) naming a
		// program the guard has rules for is judged as a command too
		// (deny rules only).
		for j := 1; j < len(ws) && j <= maxScan; j++ {
			if ws[j].lit && c.hasRules(c.progBase(ws[j].text)) {
				if b := c.command(ws[j:], scope{depth: sc.depth, mode: modeCode}, callCtx{wrappers: cc.wrappers + 1, noScan: true}); b != nil {
					return b
				}
			}
		}
	}
	if transparent {
		return nil
	}
	return c.allowed(text, sc)
}

// allowed applies the allowlist to one command's normalised text.
func (c *checker) allowed(text string, sc scope) *Blocked {
	if sc.mode != modeScript || !c.g.AllowlistMode() {
		return nil
	}
	for _, re := range c.g.allow {
		if re.MatchString(text) {
			return nil
		}
	}
	return block(text, "not on the allowlist")
}

// scriptWord judges a word that a program runs as a shell script.
func (c *checker) scriptWord(w word, who string, sc scope) *Blocked {
	if !w.lit {
		if sc.mode == modeCode {
			return nil
		}
		return block(who+" "+w.text, "the script given to "+who+" is computed at run time")
	}
	return c.script(w.text, scope{depth: sc.depth + 1, mode: sc.mode})
}

// rules are the built-in deny rules for one program, judged on its decoded
// words whatever their spelling. They return the reason, or "".
func rules(base string, ws []word, cc callCtx) string {
	switch {
	case formatTool(base):
		return "formatting or partitioning disks (" + base + ") is not allowed"
	case powerCommands[base]:
		return "shutting down or rebooting the machine is not allowed"
	}
	if rule, ok := programRules[base]; ok {
		if reason := rule(base, ws, cc); reason != "" {
			return reason
		}
	}
	// Windows commands from CountBot's list, in any letter case.
	if rule, ok := windowsRules[strings.ToLower(base)]; ok {
		return rule(base, ws, cc)
	}
	return ""
}

// denyRule judges the decoded words of one program and returns the reason
// to refuse them, or "".
type denyRule func(base string, ws []word, cc callCtx) string

// programRules are the deny rules by program name (besides the format
// tools and the power commands, which are refused whatever their words).
var programRules = map[string]denyRule{
	"rm": rmRule, "shred": secureDeleteRule, "wipe": secureDeleteRule, "srm": secureDeleteRule,
	"dd": ddRule, "init": initRule, "telinit": initRule, "systemctl": powerVerbRule, "loginctl": powerVerbRule,
	"kill": killRule, "killall5": killall5Rule, "chmod": ownerRule, "chown": ownerRule, "chgrp": ownerRule,
	"mv": mvRule, "cp": copyRule, "install": copyRule, "ln": copyRule, "tee": writeRule, "truncate": writeRule,
	"hash": hashRule, "enable": enableRule, "unlink": unlinkRule, "rmdir": unlinkRule,
}

// windowsRules are the deny rules for Windows commands, by lower-case name.
var windowsRules = map[string]denyRule{
	"format": winFormatRule, "format.com": winFormatRule, "format.exe": winFormatRule,
	"del": delRule, "erase": delRule, "del.exe": delRule, "rmdir": rdRule, "rd": rdRule,
}

func secureDeleteRule(base string, _ []word, _ callCtx) string {
	return base + " (secure deletion) is not allowed"
}

func ddRule(_ string, ws []word, _ callCtx) string {
	for _, w := range ws[1:] {
		if strings.HasPrefix(w.text, "if=") {
			return "dd if= (raw disk copy) is not allowed"
		}
		if v, ok := strings.CutPrefix(w.text, "of="); ok {
			if r := protectedWrite(v); r != "" {
				return r
			}
		}
	}
	return ""
}

// initRule refuses changing the run level; a bare `init` does nothing.
func initRule(base string, ws []word, _ callCtx) string {
	if base == "init" && len(ws) < 2 {
		return ""
	}
	return "changing the run level (init 0/6) is not allowed"
}

// powerVerbRule refuses systemctl and loginctl verbs that stop the machine.
func powerVerbRule(base string, ws []word, _ callCtx) string {
	for _, w := range ws[1:] {
		if powerVerbs[w.text] {
			return "shutting down or rebooting the machine is not allowed (" + base + " " + w.text + ")"
		}
	}
	return ""
}

func killall5Rule(string, []word, callCtx) string { return "killing every process is not allowed" }

// ownerRule refuses chmod, chown and chgrp on system paths.
func ownerRule(base string, ws []word, _ callCtx) string {
	for _, a := range operands(ws, "") {
		if a == "--no-preserve-root" {
			return base + " --no-preserve-root is not allowed"
		}
		if isSystemPath(a) {
			return "changing owner or permissions of system path " + a + " is not allowed"
		}
	}
	return ""
}

func mvRule(_ string, ws []word, _ callCtx) string {
	for _, a := range operands(ws, "tS") {
		if isSystemPath(a) {
			return "moving system path " + a + " is not allowed"
		}
	}
	return ""
}

// copyRule refuses cp, install and ln onto a system path.
func copyRule(_ string, ws []word, _ callCtx) string {
	ops := operands(ws, "tSmogb")
	targetDir := false
	for _, w := range ws[1:] {
		if w.text == "-t" || strings.HasPrefix(w.text, "--target-directory") {
			targetDir = true // the last operand is a source, not where it goes
		}
	}
	if len(ops) > 0 && !targetDir && isSystemPath(ops[len(ops)-1]) {
		return "overwriting system path " + ops[len(ops)-1] + " is not allowed"
	}
	for i, w := range ws {
		if t, ok := strings.CutPrefix(w.text, "--target-directory="); ok && isSystemPath(t) {
			return "overwriting system path " + t + " is not allowed"
		}
		if w.text == "-t" && i+1 < len(ws) && isSystemPath(ws[i+1].text) {
			return "overwriting system path " + ws[i+1].text + " is not allowed"
		}
	}
	return ""
}

// writeRule refuses tee and truncate on devices and system paths.
func writeRule(_ string, ws []word, _ callCtx) string {
	for _, a := range operands(ws, "s") {
		if r := protectedWrite(a); r != "" {
			return r
		}
	}
	return ""
}

func hashRule(_ string, ws []word, _ callCtx) string {
	for _, w := range ws[1:] {
		if w.lit && strings.HasPrefix(w.text, "-") && strings.Contains(w.text, "p") {
			return "hash -p (making a command name run another program) is not allowed"
		}
	}
	return ""
}

func enableRule(_ string, ws []word, _ callCtx) string {
	for _, w := range ws[1:] {
		if w.lit && strings.HasPrefix(w.text, "-") && strings.Contains(w.text, "f") {
			return "enable -f (loading a builtin from a shared library) is not allowed"
		}
	}
	return ""
}

// unlinkRule refuses unlink and rmdir on system paths.
func unlinkRule(_ string, ws []word, _ callCtx) string {
	for _, a := range operands(ws, "") {
		if isSystemPath(a) {
			return "removing system path " + a + " is not allowed"
		}
	}
	return ""
}

func winFormatRule(string, []word, callCtx) string { return "format is not allowed" }

func delRule(_ string, ws []word, _ callCtx) string {
	for _, w := range ws[1:] {
		if winFlag().MatchString(w.text) {
			return "del " + w.text + " is not allowed"
		}
	}
	return ""
}

func rdRule(_ string, ws []word, _ callCtx) string {
	for _, w := range ws[1:] {
		if strings.EqualFold(w.text, "/s") {
			return "rmdir /s is not allowed"
		}
	}
	return ""
}

var winFlag = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)^/[fsq]$`) })

// rmRule refuses rm with -r/-R/--recursive or -f/--force in any spelling,
// flags that may only appear at run time, and system paths.
func rmRule(_ string, ws []word, cc callCtx) string {
	ended := false
	for _, w := range ws[1:] {
		if !w.lit {
			if !ended && !w.dashSafe {
				return "rm argument `" + w.text + "` is computed at run time and could be a flag such as -rf; put -- before the file names"
			}
			if w.prefix != "" && isSystemPath(w.prefix) {
				return "removing system path " + w.text + " is not allowed"
			}
			continue
		}
		a := w.text
		if !ended {
			if a == "--" {
				ended = true
				continue
			}
			if strings.HasPrefix(a, "--") {
				name, _, _ := strings.Cut(a[2:], "=")
				if prefixOf(name, "recursive") || prefixOf(name, "force") {
					return reasonRecursiveRm
				}
				if prefixOf(name, "no-preserve-root") {
					return "rm --no-preserve-root is not allowed"
				}
				continue
			}
			if len(a) > 1 && a[0] == '-' {
				if strings.ContainsAny(a[1:], "rRf") {
					return reasonRecursiveRm
				}
				continue
			}
		}
		if isSystemPath(a) {
			return "removing system path " + a + " is not allowed"
		}
	}
	if cc.xargs && !ended {
		return "rm started by xargs could receive flags such as -rf from its input; use `xargs rm --`"
	}
	return ""
}

// killRule refuses signalling every process (kill -9 -1) or init (kill 1).
func killRule(_ string, ws []word, _ callCtx) string {
	args := ws[1:]
	i := 0
	if i < len(args) && args[i].lit && strings.HasPrefix(args[i].text, "-") && args[i].text != "--" {
		switch args[i].text {
		case "-s", "-n":
			i += 2
		case "-l", "-L":
			return ""
		default:
			i++
		}
	}
	for ; i < len(args); i++ {
		if args[i].lit && (args[i].text == "-1" || args[i].text == "1") {
			return "kill -1 or kill 1 (every process, or init) is not allowed"
		}
	}
	return ""
}

// operands returns the literal non-option words of a command; argShort
// lists short options whose value is the next word.
func operands(ws []word, argShort string) []string {
	var out []string
	ended := false
	for i := 1; i < len(ws); i++ {
		w := ws[i]
		s := w.text
		if !w.lit {
			if w.prefix != "" {
				out = append(out, w.prefix)
			}
			continue
		}
		if !ended && s == "--" {
			ended = true
			continue
		}
		if !ended && len(s) > 1 && s[0] == '-' {
			if s == "--no-preserve-root" {
				out = append(out, s)
			}
			if len(s) == 2 && strings.IndexByte(argShort, s[1]) >= 0 {
				i++
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

var powerCommands = map[string]bool{
	"shutdown": true, "reboot": true, "halt": true, "poweroff": true, "kexec": true,
}

var powerVerbs = map[string]bool{
	"poweroff": true, "reboot": true, "halt": true, "kexec": true, "soft-reboot": true,
	"suspend": true, "hibernate": true, "hybrid-sleep": true, "suspend-then-hibernate": true,
	"emergency": true, "rescue": true, "isolate": true, "switch-root": true,
}

func formatTool(base string) bool {
	if strings.HasPrefix(base, "mkfs") {
		return true
	}
	switch base {
	case "mke2fs", "mkswap", "wipefs", "mkdosfs", "mkntfs", "fdisk", "sfdisk", "cfdisk",
		"gdisk", "sgdisk", "cgdisk", "parted", "blkdiscard", "badblocks":
		return true
	}
	return false
}

var diskRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?:^|[=:,\s])/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|dm-\d|md\d|loop\d|sr\d|mapper/|disk/|mem$|kmem$|port$)`)
})

// diskDevice reports whether s names a raw disk (or memory) device.
func diskDevice(s string) bool { return strings.Contains(s, "/dev/") && diskRe().MatchString(s) }

// systemRoots are the top-level directories whose contents commands may
// not remove, move, overwrite or re-own. /var, /opt, /root and /home are
// left out: a workspace may live there.
var systemRoots = []string{"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin", "/sys", "/usr"}

// isSystemPath reports whether p is /, a system directory or inside one,
// also when reached by climbing out of the working directory (../../etc).
func isSystemPath(p string) bool {
	if p == "" {
		return false
	}
	if !strings.HasPrefix(p, "/") {
		c := path.Clean(p)
		if !strings.HasPrefix(c, "../") {
			return false
		}
		for strings.HasPrefix(c, "../") {
			c = c[3:]
		}
		if c == ".." {
			return false
		}
		p = "/" + c
	}
	c := path.Clean(p)
	if c == "/" {
		return true
	}
	for _, r := range systemRoots {
		if c == r || strings.HasPrefix(c, r+"/") {
			return true
		}
	}
	return false
}

var safeDevices = map[string]bool{
	"/dev/null": true, "/dev/zero": true, "/dev/full": true, "/dev/random": true, "/dev/urandom": true,
	"/dev/stdin": true, "/dev/stdout": true, "/dev/stderr": true, "/dev/tty": true,
}

// protectedWrite returns why writing to p is refused, or "".
func protectedWrite(p string) string {
	if diskDevice(p) {
		return "raw disk devices must not be read or written"
	}
	c := path.Clean(p)
	if strings.HasPrefix(p, "/") {
		switch {
		case safeDevices[c], strings.HasPrefix(c, "/dev/fd/"), strings.HasPrefix(c, "/dev/pts/"), strings.HasPrefix(c, "/dev/shm/"):
			return ""
		case strings.HasPrefix(c, "/dev/"):
			return "writing to device " + c + " is not allowed"
		case c == "/proc/sysrq-trigger", strings.HasPrefix(c, "/proc/sys/"), c == "/sys", strings.HasPrefix(c, "/sys/"):
			return "writing to kernel interface " + c + " is not allowed"
		}
	}
	if isSystemPath(p) {
		return "writing to system path " + p + " is not allowed"
	}
	return ""
}

// codeLoadingVar reports whether setting the variable can make a program
// run code other than its own.
func codeLoadingVar(name string) bool {
	if strings.HasPrefix(name, "LD_") || strings.HasPrefix(name, "DYLD_") {
		return true
	}
	switch name {
	case "PATH", "IFS", "ENV", "BASH_ENV", "PS4", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS",
		"BASH_LOADABLES_PATH", "GCONV_PATH", "NODE_OPTIONS", "NODE_PATH", "PYTHONSTARTUP",
		"PYTHONPATH", "PYTHONHOME", "PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB", "RUBYOPT",
		"RUBYLIB", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "PAGER", "MANPAGER",
		"EDITOR", "VISUAL", "BROWSER", "LESSOPEN", "LESSCLOSE", "SSH_ASKPASS", "SUDO_ASKPASS",
		"GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF", "GIT_PAGER", "GIT_EDITOR",
		"GIT_ASKPASS", "GIT_EXEC_PATH", "GIT_PROXY_COMMAND", "GIT_TEMPLATE_DIR",
		"GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_COUNT",
		"GOFLAGS", "CC", "CXX", "MAKEFLAGS":
		return true
	}
	return strings.HasPrefix(name, "GIT_CONFIG_")
}

package shellguard

import (
	"path"
	"strings"
)

// wrapper describes a program that runs the command given in its
// arguments.
type wrapper struct {
	spec optSpec
	// privileged wrappers change who or where the command runs as (sudo,
	// chroot): in allowlist mode the wrapper itself must be allowed too.
	privileged bool
	// shellIfEmpty: with no command, the wrapper starts an interactive
	// shell that would read standard input (chroot, su, pkexec).
	shellIfEmpty bool
}

// wrappers are the programs that run the command in their arguments, by
// name. command -v and -V only print what each name would run: their
// operands are names to look up, not a command (command -v node; command
// -v npx), so the command is judged as itself. Plain command and command
// -p do run their operand, which is judged like any wrapped command.
var wrappers = map[string]wrapper{
	"env":       {spec: optSpec{argShort: "uCS", argLong: []string{"unset", "chdir"}, scriptShort: "S", scriptLong: []string{"split-string"}, assigns: true}},
	"nice":      {spec: optSpec{argShort: "n", argLong: []string{"adjustment"}, numeric: true}},
	"timeout":   {spec: optSpec{argShort: "sk", argLong: []string{"signal", "kill-after"}, operands: 1}},
	"nohup":     {},
	"setsid":    {},
	"builtin":   {},
	"command":   {spec: optSpec{noCmdShort: "vV"}},
	"unbuffer":  {},
	"fakeroot":  {spec: optSpec{argShort: "lis", argLong: []string{"lib", "faked"}}},
	"eatmydata": {},
	"stdbuf":    {spec: optSpec{argShort: "ioe", argLong: []string{"input", "output", "error"}}},
	"time":      {spec: optSpec{argShort: "fo", argLong: []string{"format", "output"}}},
	"exec":      {spec: optSpec{argShort: "a"}},
	"ionice":    {spec: optSpec{argShort: "cnpPu", argLong: []string{"class", "classdata", "pid", "pgid", "uid"}, noCmdShort: "pPu", noCmdLong: []string{"pid", "pgid", "uid"}}},
	"strace":    {spec: optSpec{argShort: "abeEIoOpPsSuUX", argLong: []string{"output", "attach", "trace-path", "string-limit", "user", "env", "expr", "trace", "signal", "status", "quiet", "decode-fds", "columns", "summary-sort-by"}}},
	"ltrace":    {spec: optSpec{argShort: "aAeFlnopsuwxD", argLong: []string{"output", "align", "indent", "library", "config"}}},
	"taskset":   {spec: optSpec{noCmdShort: "p", operands: 1}},
	"chrt":      {spec: optSpec{argShort: "TPD", noCmdShort: "pm", operands: 1}},
	"prlimit":   {spec: optSpec{argShort: "p", noCmdShort: "p", argLong: []string{"pid"}}},
	"sudo": {privileged: true, spec: optSpec{argShort: "CDghpRrtTUu", argLong: []string{"close-from", "chdir", "group", "host", "prompt", "chroot", "role", "type", "command-timeout", "other-user", "user"},
		noCmdShort: "elvKV", noCmdLong: []string{"edit", "list", "validate", "remove-timestamp", "version", "help"}, assigns: true}},
	"doas":        {privileged: true, spec: optSpec{argShort: "uC"}},
	"pkexec":      {privileged: true, shellIfEmpty: true, spec: optSpec{argLong: []string{"user"}}},
	"chroot":      {privileged: true, shellIfEmpty: true, spec: optSpec{operands: 1}},
	"unshare":     {privileged: true, shellIfEmpty: true, spec: optSpec{argShort: "SGRw", argLong: []string{"setuid", "setgid", "root", "wd"}}},
	"nsenter":     {privileged: true, shellIfEmpty: true, spec: optSpec{argShort: "tSG", attached: "muinpUCTrw", argLong: []string{"target", "setuid", "setgid"}}},
	"setpriv":     {privileged: true, spec: optSpec{noCmdShort: "d", argLong: []string{"reuid", "regid", "groups", "inh-caps", "ambient-caps", "bounding-set", "securebits", "pdeathsig", "selinux-label", "apparmor-profile", "landlock-access", "landlock-rule"}}},
	"systemd-run": {privileged: true, spec: optSpec{argShort: "pMHEuS", argLong: []string{"property", "machine", "host", "setenv", "unit", "uid", "gid", "nice", "working-directory", "description", "slice", "on-active", "on-boot", "on-startup", "on-unit-active", "on-unit-inactive", "on-calendar", "timer-property", "path-property", "socket-property", "service-type"}}},
}

var shells = map[string]bool{
	"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "ksh93": true, "mksh": true,
	"ash": true, "posh": true, "yash": true, "rbash": true, "csh": true, "tcsh": true, "fish": true,
}

// hasRules reports whether the guard has anything to say about a program
// named base: a deny rule, or knowledge of what it starts.
func (c *checker) hasRules(base string) bool {
	if _, ok := wrappers[base]; ok {
		return true
	}
	if shells[base] || interpreterOf(base) != nil || powerCommands[base] || formatTool(base) {
		return true
	}
	lower := strings.ToLower(base)
	_, deny := programRules[lower]
	_, win := windowsRules[lower]
	_, launches := c.launchers[lower]
	return deny || win || launches
}

// launchRule judges what one program starts; see launcher.
type launchRule func(c *checker, base string, ws []word, sc scope, cc callCtx) (handled, transparent bool, b *Blocked)

// launchRules returns the launch rules by program name, besides wrappers,
// shells and interpreters, which have tables of their own. It is built by
// New rather than held in a package variable because the rules judge
// commands, which looks the rules up again: a package variable would
// refer to itself.
func launchRules() map[string]launchRule {
	pwsh := (*checker).launchPowershell
	return map[string]launchRule{
		"eval": (*checker).launchEval, "source": (*checker).launchSource, ".": (*checker).launchSource,
		"alias": (*checker).launchAlias, "trap": (*checker).launchTrap,
		"mapfile": (*checker).launchMapfile, "readarray": (*checker).launchMapfile,
		"find": (*checker).launchFind, "git": (*checker).launchGit,
		"sed": (*checker).launchSed, "gsed": (*checker).launchSed, "tar": (*checker).launchTar, "gtar": (*checker).launchTar,
		"xargs": (*checker).xargs, "parallel": (*checker).parallel, "watch": (*checker).launchWatch,
		"flock": (*checker).launchFlock, "busybox": (*checker).launchBusybox,
		"su": (*checker).launchSu, "runuser": (*checker).launchSu, "ssh": (*checker).launchSSH,
		"pwsh": pwsh, "powershell": pwsh, "pwsh.exe": pwsh, "powershell.exe": pwsh,
		"script": (*checker).launchScript,
	}
}

// launcher judges what a program starts: the command of a wrapper, the
// script of a shell or eval, the code of an interpreter. handled reports
// that base is such a program; transparent that the allowlist applies to
// what it starts only, not to the program itself.
func (c *checker) launcher(base string, ws []word, sc scope, cc callCtx) (handled, transparent bool, b *Blocked) {
	if w, ok := wrappers[base]; ok {
		return c.wrapper(base, w, ws, sc, cc)
	}
	if shells[base] {
		return c.shell(base, ws, sc, cc)
	}
	if spec := interpreterOf(base); spec != nil {
		return c.interpreter(base, *spec, ws, sc)
	}
	if rule, ok := c.launchers[base]; ok {
		return rule(c, base, ws, sc, cc)
	}
	return false, false, nil
}

// wrapper judges the command a wrapper (env, nice, sudo...) starts, the
// variables it sets and the script of env -S.
func (c *checker) wrapper(base string, w wrapper, ws []word, sc scope, cc callCtx) (bool, bool, *Blocked) {
	text := joinWords(ws)
	r := parseOpts(ws, w.spec)
	for i, name := range r.assigned {
		if b := c.envVar(name, assignedValue(r.assignArg[i]), ws[r.cmd:], r.assignArg[i].text, sc); b != nil {
			return true, false, b
		}
	}
	if r.script != nil {
		// env -S 'cmd args': a command line split by env itself.
		if b := c.scriptWord(*r.script, base, sc); b != nil {
			return true, false, b
		}
	}
	inner := ws[r.cmd:]
	if r.noCmd || len(inner) == 0 {
		startsShell := w.shellIfEmpty && !r.noCmd
		if base == "sudo" && !r.noCmd && hasKey(r.seen, "-s", "-i", "--shell", "--login") ||
			base == "doas" && hasKey(r.seen, "-s") {
			startsShell = true
		}
		if startsShell {
			return true, false, block(text, base+" without a command starts a shell reading standard input, which cannot be checked")
		}
		if r.script != nil {
			return true, !w.privileged, nil
		}
		return false, false, nil // a plain command (env alone prints the environment)
	}
	if b := c.command(inner, sc, cc.inner()); b != nil {
		return true, false, b
	}
	return true, !w.privileged, nil
}

// launchEval judges the text eval runs.
func (c *checker) launchEval(_ string, ws []word, sc scope, _ callCtx) (bool, bool, *Blocked) {
	if len(ws) == 1 {
		return true, true, nil
	}
	for _, w := range ws[1:] {
		if !w.lit {
			if sc.mode == modeCode {
				return true, true, nil
			}
			return true, false, block(joinWords(ws), "eval of text computed at run time cannot be checked")
		}
	}
	return true, true, c.script(joinWords(ws[1:]), scope{depth: sc.depth + 1, mode: sc.mode})
}

// launchSource judges the file source and . read.
func (c *checker) launchSource(base string, ws []word, sc scope, _ callCtx) (bool, bool, *Blocked) {
	ops := ws[1:]
	if len(ops) > 0 && ops[0].lit && ops[0].text == "--" {
		ops = ops[1:]
	}
	if len(ops) == 0 {
		return false, false, nil
	}
	return true, false, c.scriptFile(base, ops[0], joinWords(ws), sc)
}

// launchAlias judges the text of each alias defined.
func (c *checker) launchAlias(_ string, ws []word, sc scope, _ callCtx) (bool, bool, *Blocked) {
	for _, w := range ws[1:] {
		if !w.lit {
			if sc.mode == modeCode {
				continue
			}
			return true, false, block(joinWords(ws), "an alias computed at run time cannot be checked")
		}
		if _, val, ok := strings.Cut(w.text, "="); ok {
			if b := c.script(val, scope{depth: sc.depth + 1, mode: sc.mode}); b != nil {
				return true, false, b
			}
		}
	}
	return true, false, nil
}

// launchTrap judges the command a trap runs.
func (c *checker) launchTrap(_ string, ws []word, sc scope, _ callCtx) (bool, bool, *Blocked) {
	args := ws[1:]
	if len(args) > 0 && args[0].lit && args[0].text == "--" {
		args = args[1:]
	}
	if len(args) >= 2 && !(args[0].lit && strings.HasPrefix(args[0].text, "-")) {
		return true, false, c.scriptWord(args[0], "trap", sc)
	}
	return true, false, nil
}

// launchMapfile judges the callback of mapfile -C.
func (c *checker) launchMapfile(base string, ws []word, sc scope, _ callCtx) (bool, bool, *Blocked) {
	r := parseOpts(ws, optSpec{argShort: "dnOsuct", scriptShort: "C"})
	if r.script != nil {
		return true, false, c.scriptWord(*r.script, base+" -C", sc)
	}
	return true, false, nil
}

func (c *checker) launchFind(_ string, ws []word, sc scope, cc callCtx) (bool, bool, *Blocked) {
	return true, false, c.find(ws, sc, cc)
}

func (c *checker) launchGit(_ string, ws []word, sc scope, cc callCtx) (bool, bool, *Blocked) {
	return true, false, c.git(ws, sc, cc)
}

func (c *checker) launchSed(base string, ws []word, sc scope, cc callCtx) (bool, bool, *Blocked) {
	return true, false, c.sed(base, ws, sc, cc)
}

func (c *checker) launchTar(_ string, ws []word, sc scope, _ callCtx) (bool, bool, *Blocked) {
	return true, false, c.tar(ws, sc)
}

// launchWatch judges the command watch repeats.
func (c *checker) launchWatch(_ string, ws []word, sc scope, cc callCtx) (bool, bool, *Blocked) {
	r := parseOpts(ws, optSpec{argShort: "nq", attached: "d", argLong: []string{"interval", "equexit"}})
	inner := ws[r.cmd:]
	if len(inner) == 0 {
		return false, false, nil
	}
	if hasKey(r.seen, "-x", "--exec") {
		return true, true, c.command(inner, sc, cc.inner())
	}
	// Without -x, watch joins its arguments and runs them with sh -c.
	return true, true, c.joinedScript(inner, "watch", sc)
}

// launchFlock judges the command flock runs while holding the lock.
func (c *checker) launchFlock(_ string, ws []word, sc scope, cc callCtx) (bool, bool, *Blocked) {
	r := parseOpts(ws, optSpec{argShort: "wE", argLong: []string{"timeout", "wait", "conflict-exit-code"}})
	next := r.cmd + 1 // after the lock file
	if next >= len(ws) {
		return false, false, nil
	}
	if ws[next].lit && (ws[next].text == "-c" || ws[next].text == "--command") {
		if next+1 >= len(ws) {
			return true, false, block(joinWords(ws), "flock -c without a command")
		}
		return true, true, c.scriptWord(ws[next+1], "flock -c", sc)
	}
	return true, true, c.command(ws[next:], sc, cc.inner())
}

// launchBusybox judges the applet busybox runs.
func (c *checker) launchBusybox(_ string, ws []word, sc scope, cc callCtx) (bool, bool, *Blocked) {
	if len(ws) < 2 || !ws[1].lit || strings.HasPrefix(ws[1].text, "-") {
		return false, false, nil
	}
	return true, true, c.command(ws[1:], sc, cc.inner())
}

// launchSu judges the script of su -c and the command of runuser -u;
// without either they start a shell reading standard input.
func (c *checker) launchSu(base string, ws []word, sc scope, cc callCtx) (bool, bool, *Blocked) {
	r := parseOpts(ws, optSpec{argShort: "gGswu", argLong: []string{"group", "supp-group", "shell", "whitelist-environment", "user"},
		scriptShort: "c", scriptLong: []string{"command", "session-command"}})
	if r.script == nil {
		// Options may follow the user name: look for -c anywhere.
		for i := 1; i+1 < len(ws); i++ {
			if ws[i].lit && (ws[i].text == "-c" || ws[i].text == "--command" || ws[i].text == "--session-command") {
				r.script = &ws[i+1]
				break
			}
		}
	}
	if r.script != nil {
		if b := c.scriptWord(*r.script, base+" -c", sc); b != nil {
			return true, false, b
		}
		return true, false, nil
	}
	if base == "runuser" && hasKey(r.seen, "-u", "--user") && r.cmd < len(ws) {
		return true, false, c.command(ws[r.cmd:], sc, cc.inner())
	}
	return true, false, block(joinWords(ws), base+" without -c starts a shell reading standard input, which cannot be checked")
}

// launchSSH judges the remote command, a shell script: the host may be
// this one.
func (c *checker) launchSSH(_ string, ws []word, sc scope, _ callCtx) (bool, bool, *Blocked) {
	r := parseOpts(ws, optSpec{argShort: "BbcDEeFIiJLlmOoPpQRSWw", operands: 1})
	if r.cmd >= len(ws) {
		return false, false, nil
	}
	return true, false, c.joinedScript(ws[r.cmd:], "ssh", sc)
}

// launchPowershell scans the code of -Command and refuses -EncodedCommand.
func (c *checker) launchPowershell(base string, ws []word, sc scope, _ callCtx) (bool, bool, *Blocked) {
	text := joinWords(ws)
	for i := 1; i < len(ws); i++ {
		switch strings.ToLower(ws[i].text) {
		case "-c", "-command", "/c", "-command:":
			rest := ws[i+1:]
			if len(rest) == 0 {
				return true, false, block(text, base+" -Command without a command")
			}
			for _, w := range rest {
				if b := c.code(base, w, text, sc); b != nil {
					return true, false, b
				}
			}
			return true, false, nil
		case "-e", "-ec", "-encodedcommand":
			return true, false, block(text, base+" -EncodedCommand cannot be checked")
		}
	}
	return true, false, nil
}

// launchScript judges the command script -c records.
func (c *checker) launchScript(_ string, ws []word, sc scope, _ callCtx) (bool, bool, *Blocked) {
	r := parseOpts(ws, optSpec{argShort: "EIOBTm", scriptShort: "c", scriptLong: []string{"command"}, argLong: []string{"echo", "log-in", "log-out", "log-io", "log-timing", "logging-format"}})
	if r.script == nil {
		return true, false, block(joinWords(ws), "script without -c starts a shell reading standard input, which cannot be checked")
	}
	return true, true, c.scriptWord(*r.script, "script -c", sc)
}

func hasKey(m map[string]string, keys ...string) bool {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// joinedScript judges words that a program joins with spaces and runs with
// sh -c (watch, parallel).
func (c *checker) joinedScript(ws []word, who string, sc scope) *Blocked {
	for _, w := range ws {
		if !w.lit {
			if sc.mode == modeCode {
				return nil
			}
			return block(who+" "+joinWords(ws), "the script given to "+who+" is computed at run time")
		}
	}
	return c.script(joinWords(ws), scope{depth: sc.depth + 1, mode: sc.mode})
}

// scriptFile judges the script file a shell or source is given.
func (c *checker) scriptFile(who string, w word, text string, sc scope) *Blocked {
	if !w.lit {
		if sc.mode == modeCode {
			return nil
		}
		return block(text, "the script run by "+who+" is computed at run time")
	}
	if stdinPath(w.text) {
		return block(text, who+" reading its script from standard input cannot be checked")
	}
	return nil
}

// stdinPath reports whether p names standard input or another descriptor.
func stdinPath(p string) bool {
	c := path.Clean(p)
	return p == "-" || c == "/dev/stdin" || strings.HasPrefix(c, "/dev/fd/") ||
		strings.HasPrefix(c, "/proc/") && strings.Contains(c, "/fd/")
}

// shell judges sh/bash/... : the -c script is parsed and judged; a script
// read from standard input (a pipe, < file, a here-document) is refused.
func (c *checker) shell(base string, ws []word, sc scope, cc callCtx) (bool, bool, *Blocked) {
	text := joinWords(ws)
	cmode, stdin := false, false
	var script *word
	i := 1
	for i < len(ws) {
		w := ws[i]
		if !w.lit {
			break
		}
		s := w.text
		if s == "--" || s == "-" {
			i++
			break
		}
		if strings.HasPrefix(s, "--") {
			name, val, eq := strings.Cut(s[2:], "=")
			switch name {
			case "rcfile", "init-file":
				if !eq {
					i++
				}
			case "command", "init-command": // fish
				cmode = true
				if eq {
					v := litWord(val)
					script = &v
				} else if i+1 < len(ws) {
					i++
					script = &ws[i]
				}
			}
			i++
			continue
		}
		if len(s) > 1 && (s[0] == '-' || s[0] == '+') {
			for j := 1; j < len(s); j++ {
				switch s[j] {
				case 'c':
					cmode = true
				case 's':
					stdin = true
				case 'o', 'O':
					i++ // -o option-name
				}
			}
			i++
			continue
		}
		break
	}
	if cmode {
		if script == nil {
			if i >= len(ws) {
				return true, false, block(text, base+" -c without a script (it would come from input at run time)")
			}
			script = &ws[i]
		}
		return true, true, c.scriptWord(*script, base+" -c", sc)
	}
	if stdin || i >= len(ws) {
		if infoOnly(ws[1:]) {
			return false, false, nil
		}
		return true, false, block(text, base+" reading commands from standard input (a pipe, < file, a here-document) cannot be checked")
	}
	return true, false, c.scriptFile(base, ws[i], text, sc)
}

// infoOnly reports whether args only ask for a version or help text.
func infoOnly(args []word) bool {
	if len(args) == 0 {
		return false
	}
	for _, a := range args {
		switch a.text {
		case "--version", "-version", "-V", "-VV", "--help", "-help", "-h", "-v":
		default:
			return false
		}
	}
	return true
}

// find judges -delete, the commands of -exec/-execdir/-ok/-okdir, and
// computed words that could turn into actions.
func (c *checker) find(ws []word, sc scope, cc callCtx) *Blocked {
	text := joinWords(ws)
	for i := 1; i < len(ws); {
		w := ws[i]
		if !w.lit {
			if !w.dashSafe {
				return block(text, "find argument `"+w.text+"` is computed at run time and could be an action such as -delete")
			}
			i++
			continue
		}
		a := w.text
		switch {
		case a == "-delete":
			return block(text, "find -delete (recursive deletion) is not allowed")
		case a == "-exec" || a == "-execdir" || a == "-ok" || a == "-okdir":
			j := findExecEnd(ws, i+1, a == "-exec" || a == "-execdir")
			inner := markToken(ws[i+1:j], "{}", true)
			if b := c.command(inner, sc, cc.inner()); b != nil {
				return b
			}
			i = j + 1
			continue
		case a == "-fprint" || a == "-fprint0" || a == "-fls" || a == "-fprintf":
			// These write find's output to a file: fine, unless the file
			// is a device or a system path.
			if i+1 < len(ws) && ws[i+1].lit {
				if r := protectedWrite(ws[i+1].text); r != "" {
					return block(text, r)
				}
			}
			if a == "-fprintf" {
				i++
			}
			i += 2
			continue
		case findArgPreds[a] || strings.HasPrefix(a, "-newer") && len(a) == 8:
			i += 2
			continue
		}
		i++
	}
	return nil
}

// findExecEnd returns the index of the word ending the command of an
// -exec that starts at ws[from]. As in GNU find, ";" always ends it, while
// "+" ends it only right after "{}" and only for -exec and -execdir:
// elsewhere "+" is an argument, so `find . -exec rm + -rf x \;` runs
// `rm + -rf x`, and all of it must be judged.
func findExecEnd(ws []word, from int, plus bool) int {
	j := from
	for ; j < len(ws); j++ {
		if !ws[j].lit {
			continue
		}
		if ws[j].text == ";" {
			return j
		}
		if plus && ws[j].text == "+" && j > from && ws[j-1].lit && ws[j-1].text == "{}" {
			return j
		}
	}
	return j
}

var findArgPreds = map[string]bool{
	"-name": true, "-iname": true, "-path": true, "-ipath": true, "-wholename": true, "-iwholename": true,
	"-regex": true, "-iregex": true, "-lname": true, "-ilname": true, "-type": true, "-xtype": true,
	"-newer": true, "-anewer": true, "-cnewer": true, "-user": true, "-group": true, "-uid": true,
	"-gid": true, "-perm": true, "-size": true, "-mtime": true, "-atime": true, "-ctime": true,
	"-mmin": true, "-amin": true, "-cmin": true, "-maxdepth": true, "-mindepth": true, "-links": true,
	"-inum": true, "-samefile": true, "-fstype": true, "-used": true, "-printf": true,
	"-context": true, "-regextype": true, "-files0-from": true,
}

// xargs judges the command xargs runs. Its arguments come from input at
// run time: appended at the end, or in place of the -I replace string.
func (c *checker) xargs(_ string, ws []word, sc scope, cc callCtx) (bool, bool, *Blocked) {
	r := parseOpts(ws, optSpec{argShort: "adEILnPs", attached: "iel",
		argLong: []string{"arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"}})
	inner := ws[r.cmd:]
	if len(inner) == 0 {
		return false, false, nil // runs echo
	}
	repl := r.seen["-I"]
	if v, ok := r.seen["-i"]; ok && repl == "" {
		repl = v
		if repl == "" {
			repl = "{}"
		}
	}
	if v, ok := r.seen["--replace"]; ok && repl == "" {
		repl = v
		if repl == "" {
			repl = "{}"
		}
	}
	ic := cc.inner()
	if repl != "" {
		inner = markToken(inner, repl, false)
	} else {
		ic.xargs = true
	}
	return true, true, c.command(inner, sc, ic)
}

// parallel judges GNU parallel: like xargs, and its command line also goes
// through a shell.
func (c *checker) parallel(_ string, ws []word, sc scope, cc callCtx) (bool, bool, *Blocked) {
	text := joinWords(ws)
	r := parseOpts(ws, optSpec{argShort: "aCdEIjJlLnNPsS", argLong: []string{"jobs", "sshlogin", "arg-file", "colsep", "delimiter", "replace", "max-args", "max-replace-args"}})
	end := len(ws)
	for k := r.cmd; k < len(ws); k++ {
		if ws[k].lit && strings.HasPrefix(ws[k].text, ":::") {
			end = k
			break
		}
	}
	inner := append([]word(nil), ws[r.cmd:end]...)
	if len(inner) == 0 {
		return true, false, block(text, "parallel without a command runs its input lines as commands, which cannot be checked")
	}
	marked := false
	ic := cc.inner()
	for k := range inner {
		if o := strings.IndexByte(inner[k].text, '{'); o >= 0 && strings.IndexByte(inner[k].text[o:], '}') > 0 {
			inner[k] = markToken(inner[k:k+1], inner[k].text[o:o+strings.IndexByte(inner[k].text[o:], '}')+1], false)[0]
			marked = true
		}
	}
	if !marked {
		ic.xargs = true
	}
	if b := c.command(inner, sc, ic); b != nil {
		return true, false, b
	}
	for _, w := range inner {
		if w.lit && strings.ContainsAny(w.text, ";|&$`<>()\n") {
			return true, true, c.joinedScript(inner, "parallel", sc)
		}
	}
	return true, true, nil
}

// Package shellguard decides whether a shell command line may run.
//
// The guard parses the script with mvdan.cc/sh (bash dialect, a superset of
// what /bin/sh accepts, so it errs on the side of seeing more) and judges
// every simple command it contains: inside pipelines, lists, subshells,
// groups, compound commands, function bodies, command and process
// substitutions, here-documents, the scripts handed to `sh -c` or `eval`, and
// the commands started by wrappers such as env, sudo, xargs or
// `find -exec`, and the commands programs run from their own options or
// languages: sed's e command and s///e, tar's --checkpoint-action=exec,
// --to-command, -I and -F, awk's system() and pipes, git's command
// settings, options, ext:: URLs and GIT_SSH_COMMAND-like variables, and
// copies of a program the script makes under another name
// (cp /usr/bin/shred ./x). Regexes over the raw string alone are bypassed
// by quoting, escapes and chaining; judging the parsed script is what
// makes the denylist and the allowlist mean something.
//
// Decisions worth knowing:
//   - Quoted text passed as an argument is data: `echo "rm -rf /"` and
//     `git commit -m "rm -rf /"` pass. CountBot's raw-text patterns are matched on
//     the raw text only where a command can start (after ; & | ( { ` or a
//     newline), so `echo "a; rm -rf /"` is still refused by that seatbelt.
//   - rm with -r/-R/--recursive or -f/--force in any spelling is refused;
//     a plain `rm file.txt` passes. An rm argument computed at run time
//     ("$f", *.txt) could expand to -rf, so it must follow `--`
//     (`rm -- "$f"`, `xargs rm --`); ./*.txt is fine.
//   - A command name that is not a literal ($CMD, $(...), *) is refused in
//     both modes, as is a shell or interpreter reading its program from
//     standard input (| sh, sh < file, bash <<<...).
//   - In allowlist mode each simple command, after unwrapping env, nice,
//     timeout, xargs..., must match an allow pattern from its start; shell
//     builtins (cd, export...) are commands like any other. Privileged
//     wrappers (sudo, doas, su, chroot...) must be allowed themselves too,
//     and so must find around its -exec commands. Setting variables that
//     load code (LD_PRELOAD, PATH, BASH_ENV, GIT_SSH_COMMAND...) is refused.
//   - In both modes BASH_ENV may not be set, nor ENV to a path or for a
//     shell; variables holding a command (GIT_SSH_COMMAND, GIT_PAGER,
//     EDITOR...) have it judged. A command a program runs that is computed
//     at run time (awk's system(cmd), tar --to-command="$C", a sed script
//     whose command letters are computed) is refused.
//   - A script the parser rejects is refused in allowlist mode; in
//     denylist-only mode it is judged by the raw-text patterns alone.
//
// The guard is a seatbelt, not a wall: programs that start others (make,
// npm run, go run, a script file written earlier) are beyond what a static
// check can see. The exec sandbox is the wall.
package shellguard

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/countbot/toolsvc/internal/toolerr"
)

// Bounds on the work one Check may do.
const (
	// MaxScriptBytes is the longest script Check accepts.
	MaxScriptBytes = 64 << 10
	// MaxDepth is how deeply scripts may nest inside scripts (sh -c, eval,
	// watch, su -c, strings in inline interpreter code...).
	MaxDepth = 8

	maxTotalBytes = 1 << 20 // all script text parsed by one Check, nested scripts included
	maxWords      = 2048    // words of one simple command after brace expansion
	maxWrappers   = 32      // wrapper commands around one command (nice nice nice ...)
	maxScan       = 32      // words after a wrapper's name scanned for a hidden command
	maxTotalWords = 40_000  // words of all commands judged by one Check
	maxShown      = 200     // characters of the refused command shown in the message
	maxSource     = 512     // bytes of a computed part printed into a command's text
	maxNesting    = 256     // brackets open at once in the raw script
	maxParses     = 4096    // scripts parsed by one Check (nested ones, strings in inline code)
)

// Options configures a Guard.
type Options struct {
	// Deny holds extra deny regexes (TOOLSVC_EXEC_DENY_PATTERNS). They are
	// ADDED to the built-in rules, never replacing them, and are matched
	// anywhere in the raw script and in each command's normalised text.
	Deny []string
	// Allow holds allow regexes (TOOLSVC_EXEC_ALLOW_PATTERNS). A non-empty
	// list switches on allowlist mode: every simple command must match one
	// of them, matched from the start of the command's normalised text (as
	// if each pattern began with ^). An allow match never switches the
	// denylist off.
	Allow []string
}

// Guard judges shell scripts. It is safe for concurrent use.
type Guard struct {
	deny       []*regexp.Regexp
	allow      []*regexp.Regexp
	denySource []string
	launchers  map[string]launchRule // read-only after New
}

// New compiles the configured patterns. An invalid or empty pattern is an
// error naming it, so that start-up stops rather than running with a guard
// other than the one configured.
func New(opts Options) (*Guard, error) {
	g := &Guard{launchers: launchRules()}
	for i, p := range opts.Deny {
		if strings.TrimSpace(p) == "" {
			return nil, fmt.Errorf("shellguard: deny pattern #%d is empty", i+1)
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("shellguard: invalid deny pattern %q: %w", p, err)
		}
		g.deny = append(g.deny, re)
		g.denySource = append(g.denySource, p)
	}
	for i, p := range opts.Allow {
		if strings.TrimSpace(p) == "" {
			// An empty allow pattern would allow everything.
			return nil, fmt.Errorf("shellguard: allow pattern #%d is empty", i+1)
		}
		// Anchored at the start: an unanchored "git status" would allow
		// `curl http://x/?q=git status`.
		re, err := regexp.Compile(`^(?:` + p + `)`)
		if err != nil {
			return nil, fmt.Errorf("shellguard: invalid allow pattern %q: %w", p, err)
		}
		g.allow = append(g.allow, re)
	}
	return g, nil
}

// AllowlistMode reports whether allow patterns are configured.
func (g *Guard) AllowlistMode() bool { return len(g.allow) > 0 }

// Check returns nil when script may run. Otherwise it returns a
// *toolerr.Error with code policy_denied whose cause is a *Blocked naming
// the refused command and the reason.
func (g *Guard) Check(script string) error {
	if b := g.check(script); b != nil {
		return &toolerr.Error{Code: toolerr.PolicyDenied, Message: b.Error(), Err: b}
	}
	return nil
}

func (g *Guard) check(script string) *Blocked {
	if strings.TrimSpace(script) == "" {
		return &Blocked{Reason: reasonEmpty}
	}
	if len(script) > MaxScriptBytes {
		return &Blocked{Reason: fmt.Sprintf("command is longer than %d bytes", MaxScriptBytes)}
	}
	if strings.IndexByte(script, 0) >= 0 {
		return &Blocked{Reason: "command contains a NUL byte"}
	}
	if nestingDepth(script) > maxNesting {
		// The parser's cost grows steeply with bracket depth; no real
		// command nests this deeply.
		return &Blocked{Reason: fmt.Sprintf("command nests brackets more than %d levels deep", maxNesting)}
	}
	launchers := g.launchers
	if launchers == nil {
		launchers = launchRules() // a Guard not made by New
	}
	c := &checker{g: g, launchers: launchers, seen: map[any]bool{}}
	if b := c.script(script, scope{depth: 0, mode: modeScript}); b != nil {
		return b
	}
	if len(c.renamed) > 0 {
		// The script copies or links a program the guard has rules for
		// under another name. Judge it again knowing every such name, so
		// that a copy run before the line that makes it (in a loop, a
		// function) is caught too.
		again := &checker{g: g, launchers: launchers, seen: map[any]bool{}, renamed: c.renamed}
		if b := again.script(script, scope{depth: 0, mode: modeScript}); b != nil {
			return b
		}
	}
	return nil
}

// nestingDepth returns the largest number of brackets open at once.
func nestingDepth(s string) int {
	depth, deepest := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '{', '[':
			if depth++; depth > deepest {
				deepest = depth
			}
		case ')', '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return deepest
}

// Blocked is the cause of the error Check returns for a refused script.
type Blocked struct {
	// Command is the normalised text of the refused command (empty when the
	// whole script is refused, e.g. for being empty or too long).
	Command string
	// Reason says, for a human and a model, why it was refused.
	Reason string
}

// Error returns "Command blocked by safety guard (<reason>: `<command>`)".
func (b *Blocked) Error() string {
	if b.Command == "" {
		return "Command blocked by safety guard (" + b.Reason + ")"
	}
	return "Command blocked by safety guard (" + b.Reason + ": `" + shown(b.Command) + "`)"
}

// shown makes a command printable on one line and bounded.
func shown(s string) string {
	var sb strings.Builder
	n := 0
	for _, r := range s {
		if n >= maxShown {
			sb.WriteString("…")
			break
		}
		n++
		switch {
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r == utf8.RuneError:
			sb.WriteByte('?') // invalid UTF-8 is not passed on
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&sb, `\x%02x`, r)
		default:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

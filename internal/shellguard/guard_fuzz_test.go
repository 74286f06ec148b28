package shellguard

import (
	"errors"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/toolerr"
	"mvdan.cc/sh/v3/syntax"
)

// FuzzCheckRmRfRoot runs the guard on arbitrary scripts, alone and with a plain
// `rm -rf /` line put between two fuzzed halves. Check must never panic, and
// whenever bash would parse `rm -rf /` as a simple command anywhere in the
// script (in a chain, a subshell, a function, a substitution...), the script
// must be refused.
func FuzzCheckRmRfRoot(f *testing.F) {
	for _, s := range []string{
		"ls -la", "echo hi; ls", "rm -rf /", "rm -rf / --no-preserve-root", "echo 'rm -rf /'",
		"cat <<EOF\nrm -rf /\nEOF", "f() { rm -rf /; }", "(rm -rf /)", "echo $(rm -rf /)", "x=1 rm -rf /",
		"if true; then rm -rf /; fi", "# rm -rf /", "echo \"", "case x in x) rm -rf /;; esac", "a && b || rm -rf /",
		"for i in 1; do rm -rf /; done", "{ rm -rf /; }", "echo `rm -rf /`", "cat <(rm -rf /)", "sh -c 'ls'",
		"eval ls", "python3 -c 'print(1)'", "git status", "find . -name '*.go'", "((1+1))", "[[ -f x ]]",
		"echo ${x:-$(rm -rf /)}", "coproc rm -rf /", "time rm -rf /", "! rm -rf /", "rm -rf / &",
		"\\rm -rf /", "r\\\nm -rf /", "echo '", "echo $((", strings.Repeat("(", 300),
	} {
		f.Add(s, "")
		f.Add("", s)
	}
	g, err := New(Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, before, after string) {
		for _, script := range []string{before + after, before + "\nrm -rf /\n" + after} {
			err := g.Check(script)
			if err != nil {
				var b *Blocked
				if !errors.As(err, &b) || toolerr.ErrorCode(err) != toolerr.PolicyDenied {
					t.Fatalf("Check(%q) returned %T, not a refusal with a *Blocked: %v", script, err, err)
				}
				continue
			}
			if hasPlainRmRfRoot(script) {
				t.Fatalf("Check allowed a script holding `rm -rf /` as a command: %q", script)
			}
		}
	})
}

// hasPlainRmRfRoot reports whether bash parses script into a simple
// command whose words are exactly rm, -rf and /, written plainly.
func hasPlainRmRfRoot(script string) bool {
	file, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(script), "")
	if err != nil {
		return false
	}
	found := false
	syntax.Walk(file, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) != 3 {
			return !found
		}
		want := []string{"rm", "-rf", "/"}
		for i, w := range call.Args {
			if w.Lit() != want[i] {
				return !found
			}
		}
		found = true
		return false
	})
	return found
}

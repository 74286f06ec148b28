package shellguard

import (
	"regexp"
	"slices"
	"strings"
	"sync"
)

// interpSpec describes how a script interpreter takes its program.
type interpSpec struct {
	code     string   // short options whose value is program text (python -c, perl -e)
	codeLong []string // long options whose value is program text (node --eval)
	arg      string   // short options taking a value
	argLong  []string // long options taking a value
	stop     string   // short options after which the rest belongs to a module (python -m)
	fileOpt  byte     // short option naming a program file (awk -f, php -f)
	awk      bool     // the first operand is the program text
	sub      string   // subcommand whose first operand is program text (deno eval)
}

// interpreters maps an interpreter's name, version digits removed
// (python3.12 -> python), to how it takes its program.
var interpreters = map[string]interpSpec{
	"python":    {code: "c", arg: "WXQ", stop: "m"},
	"pypy":      {code: "c", arg: "WXQ", stop: "m"},
	"perl":      {code: "eE", arg: "IMm"},
	"ruby":      {code: "e", arg: "ICEFr"},
	"node":      {code: "ep", codeLong: []string{"eval", "print"}, arg: "r", argLong: []string{"require", "import", "loader", "input-type", "conditions", "title"}},
	"nodejs":    {code: "ep", codeLong: []string{"eval", "print"}, arg: "r", argLong: []string{"require", "import", "loader", "input-type", "conditions", "title"}},
	"bun":       {code: "ep", codeLong: []string{"eval", "print"}, arg: "r", argLong: []string{"require", "import", "loader", "input-type", "conditions", "title"}},
	"deno":      {sub: "eval"},
	"php":       {code: "rBRE", arg: "cdzf", fileOpt: 'f', stop: "S"},
	"lua":       {code: "e", arg: "l"},
	"luajit":    {code: "e", arg: "l"},
	"awk":       awkSpec,
	"gawk":      awkSpec,
	"mawk":      awkSpec,
	"nawk":      awkSpec,
	"Rscript":   {code: "e"},
	"R":         {code: "e"},
	"julia":     {code: "eE", codeLong: []string{"eval", "print"}},
	"expect":    {code: "c"},
	"osascript": {code: "e"},
	"tclsh":     {},
}

var awkSpec = interpSpec{code: "e", codeLong: []string{"source"}, arg: "Fvf", argLong: []string{"file", "assign", "field-separator"}, fileOpt: 'f', awk: true}

// interpreterOf returns the spec of a script interpreter named base.
func interpreterOf(base string) *interpSpec {
	if sp, ok := interpreters[strings.TrimRight(base, "0123456789.")]; ok {
		return &sp
	}
	return nil
}

// interpreter judges an interpreter call: inline code is scanned, a
// program read from standard input is refused. The interpreter command
// itself is subject to the allowlist (transparent is false).
func (c *checker) interpreter(base string, sp interpSpec, ws []word, sc scope) (bool, bool, *Blocked) {
	text := joinWords(ws)
	if sp.sub != "" {
		return c.interpreterSub(base, sp, ws, sc)
	}
	a := scanInterp(sp, ws)
	if a.program >= 0 && sp.awk && len(a.codes) == 0 && !a.fileGiven {
		a.codes = append(a.codes, ws[a.program]) // awk's first operand is its program
	}
	for _, cw := range a.codes {
		if b := c.code(base, cw, text, sc); b != nil {
			return true, false, b
		}
		if sp.awk && cw.lit {
			if b := c.awkProgram(base, cw.text, text, sc); b != nil {
				return true, false, b
			}
		}
	}
	switch {
	case len(a.codes) > 0, a.module, a.fileGiven:
		return true, false, nil
	case a.program >= 0:
		return true, false, c.scriptFile(base, ws[a.program], text, sc)
	case !a.stdin && infoOnly(ws[1:]):
		return false, false, nil
	}
	return true, false, block(text, base+" reading its program from standard input cannot be checked")
}

// interpreterSub judges an interpreter whose inline code comes after a
// subcommand (deno eval '...').
func (c *checker) interpreterSub(base string, sp interpSpec, ws []word, sc scope) (bool, bool, *Blocked) {
	if len(ws) < 2 || !ws[1].lit || ws[1].text != sp.sub {
		return false, false, nil // deno run x.ts, deno fmt...
	}
	for k := 2; k < len(ws); k++ {
		if !ws[k].lit || !strings.HasPrefix(ws[k].text, "-") {
			return true, false, c.code(base, ws[k], joinWords(ws), sc)
		}
	}
	return true, false, nil
}

// interpArgs is what scanInterp found on an interpreter's command line.
type interpArgs struct {
	codes     []word // inline program texts (-c, -e, --eval...)
	program   int    // index of the program file (or awk program), -1 if none
	stdin     bool   // "-": the program comes from standard input
	module    bool   // a module runs (python -m)
	fileGiven bool   // a program file option (awk -f, php -f)
}

// noProgramYet reports whether a later operand would be the program.
func (a *interpArgs) noProgramYet() bool { return len(a.codes) == 0 && !a.fileGiven }

// scanInterp walks an interpreter's options as sp describes them, up to
// the program operand.
func scanInterp(sp interpSpec, ws []word) interpArgs {
	a := interpArgs{program: -1}
	for i := 1; i < len(ws); i++ {
		w := ws[i]
		s := w.text
		switch {
		case !w.lit:
			if a.noProgramYet() {
				a.program = i
			}
			return a
		case s == "--":
			if i+1 < len(ws) && a.noProgramYet() {
				a.program = i + 1
			}
			return a
		case s == "-":
			a.stdin = true
			return a
		case strings.HasPrefix(s, "--"):
			i = a.longOpt(sp, ws, i)
		case len(s) > 1 && s[0] == '-':
			var stop bool
			if i, stop = a.shortOpts(sp, ws, i); stop {
				return a
			}
		default:
			if a.noProgramYet() {
				a.program = i
			}
			return a
		}
	}
	return a
}

// longOpt reads the long option at ws[i] and returns the index of the last
// word it used.
func (a *interpArgs) longOpt(sp interpSpec, ws []word, i int) int {
	name, val, eq := strings.Cut(ws[i].text[2:], "=")
	switch {
	case slices.Contains(sp.codeLong, name):
		if eq {
			a.codes = append(a.codes, litWord(val))
		} else if i+1 < len(ws) {
			i++
			a.codes = append(a.codes, ws[i])
		}
	case slices.Contains(sp.argLong, name):
		if sp.awk && name == "file" {
			a.fileGiven = true
		}
		if !eq {
			i++
		}
	}
	return i
}

// shortOpts reads the cluster of short options at ws[i] and returns the
// index of the last word it used; stop reports an option after which the
// rest belongs to a module.
func (a *interpArgs) shortOpts(sp interpSpec, ws []word, i int) (last int, stop bool) {
	s := ws[i].text
	for j := 1; j < len(s); j++ {
		ch := s[j]
		switch {
		case strings.IndexByte(sp.code, ch) >= 0:
			if j+1 < len(s) {
				a.codes = append(a.codes, litWord(s[j+1:]))
			} else if i+1 < len(ws) {
				i++
				a.codes = append(a.codes, ws[i])
			}
			return i, false
		case strings.IndexByte(sp.stop, ch) >= 0:
			a.module = true
			return i, true
		case strings.IndexByte(sp.arg, ch) >= 0:
			if ch == sp.fileOpt && sp.fileOpt != 0 {
				a.fileGiven = true
			}
			// The value is the rest of the word, or the next word; a next
			// word that looks like an option is not taken, so that a
			// misread never hides code (perl -i -pe ...).
			if j+1 == len(s) && i+1 < len(ws) && !strings.HasPrefix(ws[i+1].text, "-") {
				i++
			}
			return i, false
		}
	}
	return i, false
}

// The string patterns are compiled on first use, not at every start of
// the program.
var (
	stringLitRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?s)"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	})
	stringListRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?s)[\[(]\s*(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')(?:\s*,\s*(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'))+\s*,?\s*[\])]`)
	})
)

// code scans program text given inline to an interpreter: the deny
// patterns and the strict built-ins over the text, then every string
// literal judged as a shell command line (os.system("..."), `...`), and
// every list of string literals judged as an argument vector
// (subprocess.run(["rm", "-rf", "/"])). Strings are judged by the deny
// rules only: they may well be data.
func (c *checker) code(interp string, cw word, text string, sc scope) *Blocked {
	if !cw.lit {
		if sc.mode == modeCode {
			return nil
		}
		return block(text, "the code given to "+interp+" is computed at run time")
	}
	code := cw.text
	if b := c.denyPatterns(code, text); b != nil {
		return b
	}
	if reason, ok := matchRules(strictRules(), code); ok {
		return block(text, reason+" (in inline "+interp+" code)")
	}
	inner := scope{depth: sc.depth + 1, mode: modeCode}
	if inner.depth > MaxDepth {
		return block(text, "commands are nested more than 8 levels deep (sh -c, eval, ...)")
	}
	for _, m := range stringListRe().FindAllString(code, -1) {
		var ws []word
		for _, s := range stringLitRe().FindAllString(m, -1) {
			ws = append(ws, litWord(unquoteLit(s)))
		}
		if b := c.command(ws, inner, callCtx{}); b != nil {
			b.Reason += " (in inline " + interp + " code)"
			return b
		}
	}
	for _, s := range stringLitRe().FindAllString(code, -1) {
		body := unquoteLit(s)
		if strings.TrimSpace(body) == "" {
			continue
		}
		if !strings.ContainsAny(body, " \t\n;&|<>()$`'\"\\{}*?[]~#=") {
			// A single plain word: judge it as a command without parsing.
			if b := c.command([]word{litWord(body)}, inner, callCtx{}); b != nil {
				b.Reason += " (in inline " + interp + " code)"
				return b
			}
			continue
		}
		if b := c.script(body, inner); b != nil {
			b.Reason += " (in inline " + interp + " code)"
			return b
		}
	}
	return nil
}

// unquoteLit strips the quotes of a string literal and its simple escapes.
func unquoteLit(s string) string {
	s = s[1 : len(s)-1]
	if !strings.Contains(s, `\`) {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case 'n':
				sb.WriteByte('\n')
			case 't':
				sb.WriteByte('\t')
			default:
				sb.WriteByte(s[i])
			}
			continue
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

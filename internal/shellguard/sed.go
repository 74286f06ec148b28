package shellguard

import (
	"strings"
)

// computedMark stands for a part of a sed script computed at run time. A
// script never holds a NUL byte (Check refuses them), so the mark cannot
// be confused with script text.
const computedMark = '\x00'

// sed judges the commands GNU sed runs and the files it writes: the `e`
// command (`e cmd` runs cmd, a bare `e` runs the pattern space), the `e`
// flag of `s///` (runs the pattern space after the substitution), and the
// file names of `w`, `W` and the `w` flag. The scripts come from -e,
// --expression or the first operand; a script in a file (-f) is not seen.
// With --sandbox, sed itself refuses e, w and r, so nothing is judged.
func (c *checker) sed(base string, ws []word, sc scope, cc callCtx) *Blocked {
	text := joinWords(ws)
	a := scanSedArgs(ws)
	scripts := a.scripts
	if len(scripts) == 0 && !a.fileGiven {
		if a.firstOperand == nil {
			if cc.xargs {
				return block(text, base+" started by xargs would take its script from the input, which cannot be checked")
			}
			return nil // sed --version, or a usage error
		}
		scripts = append(scripts, *a.firstOperand)
	}
	if a.sandbox {
		return nil
	}
	// Several -e scripts are joined with newlines, as sed does.
	var sb strings.Builder
	for k, w := range scripts {
		if k > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(maskedText(w))
	}
	script := sb.String()
	if strings.IndexByte(script, computedMark) >= 0 && sc.mode == modeScript && c.g.AllowlistMode() {
		return block(text, "the "+base+" script is computed at run time and could hold an e (execute) command; write it literally, or add --sandbox")
	}
	r := scanSed(script)
	if r.problem != "" {
		if sc.mode == modeCode && strings.Contains(r.problem, "computed") {
			return nil
		}
		return block(text, r.problem)
	}
	for _, f := range r.writes {
		if i := strings.IndexByte(f, computedMark); i >= 0 {
			f = f[:i]
		}
		if reason := protectedWrite(f); reason != "" {
			return block(text, reason+" (sed w)")
		}
	}
	for _, cmd := range r.execs {
		if b := c.script(cmd, scope{depth: sc.depth + 1, mode: sc.mode}); b != nil {
			b.Reason += " (in a sed e command)"
			return b
		}
	}
	return nil
}

// sedArgs is what scanSedArgs found on sed's command line.
type sedArgs struct {
	scripts      []word // the values of -e and --expression
	fileGiven    bool   // -f or --file: the script is in a file
	sandbox      bool   // --sandbox: sed refuses e, w and r itself
	firstOperand *word  // the script when there is no -e or -f
}

// scanSedArgs reads sed's options, which GNU getopt finds anywhere before
// "--".
func scanSedArgs(ws []word) sedArgs {
	var a sedArgs
	ended := false
	for i := 1; i < len(ws); i++ {
		w := ws[i]
		s := w.text
		switch {
		case ended || !w.lit || len(s) < 2 || s[0] != '-':
			if a.firstOperand == nil {
				a.firstOperand = &ws[i]
			}
		case s == "--":
			ended = true
		case strings.HasPrefix(s, "--"):
			i = a.longOpt(ws, i)
		default:
			i = a.shortOpts(ws, i)
		}
	}
	return a
}

// longOpt reads the long option at ws[i], perhaps abbreviated, and returns
// the index of the last word it used.
func (a *sedArgs) longOpt(ws []word, i int) int {
	name, val, eq := strings.Cut(ws[i].text[2:], "=")
	switch {
	case prefixOf(name, "expression"): // the only long option starting with e
		if eq {
			a.scripts = append(a.scripts, litWord(val))
		} else if i+1 < len(ws) {
			i++
			a.scripts = append(a.scripts, ws[i])
		}
	case len(name) >= 2 && prefixOf(name, "file"):
		a.fileGiven = true
		if !eq {
			i++
		}
	case len(name) >= 2 && prefixOf(name, "sandbox"):
		a.sandbox = true
	case prefixOf(name, "line-length") && !eq:
		i++
	}
	return i
}

// shortOpts reads the cluster of short options at ws[i] and returns the
// index of the last word it used.
func (a *sedArgs) shortOpts(ws []word, i int) int {
	s := ws[i].text
	for j := 1; j < len(s); j++ {
		ch := s[j]
		if ch == 'i' {
			return i // -i[SUFFIX]: the rest of the word is the suffix
		}
		if ch != 'e' && ch != 'f' && ch != 'l' {
			continue
		}
		var v word
		if j+1 < len(s) {
			v = litWord(s[j+1:])
		} else if i+1 < len(ws) {
			i++
			v = ws[i]
		}
		switch ch {
		case 'e':
			a.scripts = append(a.scripts, v)
		case 'f':
			a.fileGiven = true
		}
		return i
	}
	return i
}

// sedScan is what scanSed found in a sed script.
type sedScan struct {
	execs   []string // commands of `e command`
	writes  []string // files written by w, W and the w flag of s
	problem string   // why the script is refused, or ""
}

const (
	reasonSedPattern  = "sed would run the pattern space as a command (a bare e, or the e flag of s), which cannot be checked"
	reasonSedComputed = "sed script has a command computed at run time, which could be an e (execute) command; write the command letters literally"
)

// scanSed reads a GNU sed script well enough to find its e commands, the e
// flags of s and the files it writes. It is lenient: text it cannot read is
// skipped a character at a time, which finds at least every e that sed
// itself would accept. computedMark stands for computed text: as a command
// or an s flag it is refused, inside a regex, a replacement or text it is
// data.
func scanSed(s string) sedScan {
	var r sedScan
	p := &sedParser{s: s}
	for {
		p.skip(" \t\n;")
		if p.eof() {
			return r
		}
		if p.peek() == '#' {
			p.toEOL()
			continue
		}
		computedAddr := p.addresses()
		if p.eof() {
			if computedAddr {
				r.problem = reasonSedComputed
			}
			return r
		}
		// A letter without arguments, or one sed would reject, needs
		// nothing more.
		if cmd, ok := sedCommands[p.next()]; ok && cmd(p, &r) {
			return r
		}
	}
}

// sedCommand reads the arguments of one sed command, records what it
// finds and reports whether the scan ends there.
type sedCommand func(p *sedParser, r *sedScan) (stop bool)

// sedCommands are the sed commands that take arguments, by letter.
var sedCommands = map[byte]sedCommand{
	computedMark: sedComputedCommand,
	'l':          sedNumberArg, 'L': sedNumberArg, 'q': sedNumberArg, 'Q': sedNumberArg,
	':': sedLabelArg, 'b': sedLabelArg, 't': sedLabelArg, 'T': sedLabelArg, 'v': sedLabelArg,
	'a': sedTextArg, 'i': sedTextArg, 'c': sedTextArg,
	'r': sedReadArg, 'R': sedReadArg, 'w': sedWriteArg, 'W': sedWriteArg,
	'e': sedExecArg, 's': sedSubstitute, 'y': sedTransliterate,
}

func sedComputedCommand(_ *sedParser, r *sedScan) bool {
	r.problem = reasonSedComputed
	return true
}

func sedNumberArg(p *sedParser, _ *sedScan) bool {
	p.skip(" \t")
	p.skip("0123456789")
	return false
}

func sedLabelArg(p *sedParser, _ *sedScan) bool {
	p.skip(" \t")
	p.until(";\n")
	return false
}

func sedTextArg(p *sedParser, _ *sedScan) bool {
	p.text()
	return false
}

func sedReadArg(p *sedParser, _ *sedScan) bool {
	p.toEOL()
	return false
}

func sedWriteArg(p *sedParser, r *sedScan) bool {
	p.skip(" \t")
	r.writes = append(r.writes, p.toEOL())
	return false
}

// sedExecArg reads `e command`; a bare e runs the pattern space.
func sedExecArg(p *sedParser, r *sedScan) bool {
	p.skip(" \t")
	cmd := p.toEOL()
	switch {
	case strings.IndexByte(cmd, computedMark) >= 0:
		r.problem = "sed e command is computed at run time, which cannot be checked"
		return true
	case strings.TrimSpace(cmd) == "":
		r.problem = reasonSedPattern
		return true
	}
	r.execs = append(r.execs, cmd)
	return false
}

// sedSubstitute reads s/regex/replacement/flags: the e flag runs the
// pattern space, the w flag writes a file.
func sedSubstitute(p *sedParser, r *sedScan) bool {
	if sedTransliterate(p, r) {
		return true
	}
	for !p.eof() {
		switch f := p.peek(); {
		case f == 'e':
			r.problem = reasonSedPattern
			return true
		case f == computedMark:
			r.problem = reasonSedComputed
			return true
		case f == 'w':
			p.i++
			return sedWriteArg(p, r)
		case strings.IndexByte("gpiImM0123456789", f) >= 0:
			p.i++
		default:
			return false
		}
	}
	return false
}

// sedTransliterate reads y/source/dest/ (and the two parts of s).
func sedTransliterate(p *sedParser, _ *sedScan) bool {
	if p.eof() {
		return true
	}
	delim := p.next()
	p.delimited(delim)
	p.delimited(delim)
	return false
}

type sedParser struct {
	s string
	i int
}

func (p *sedParser) eof() bool  { return p.i >= len(p.s) }
func (p *sedParser) peek() byte { return p.s[p.i] }
func (p *sedParser) next() byte { p.i++; return p.s[p.i-1] }

// skip moves past any of the bytes in set.
func (p *sedParser) skip(set string) {
	for !p.eof() && strings.IndexByte(set, p.peek()) >= 0 {
		p.i++
	}
}

// until moves to the next byte in set (or the end) and returns the text.
func (p *sedParser) until(set string) string {
	start := p.i
	for !p.eof() && strings.IndexByte(set, p.peek()) < 0 {
		p.i++
	}
	return p.s[start:p.i]
}

// toEOL returns the rest of the line: file names and e commands include
// semicolons.
func (p *sedParser) toEOL() string { return p.until("\n") }

// delimited moves past text ending with an unescaped delim (a regex or a
// replacement).
func (p *sedParser) delimited(delim byte) {
	for !p.eof() {
		ch := p.next()
		if ch == '\\' && !p.eof() {
			p.i++
			continue
		}
		if ch == delim {
			return
		}
	}
}

// text moves past the text of a, i or c: one line, continued by a
// backslash at its end (the classic `a\` form starts on the next line).
func (p *sedParser) text() {
	p.skip(" \t")
	if !p.eof() && p.peek() == '\\' {
		p.i++
		if !p.eof() && p.peek() == '\n' {
			p.i++
		}
	}
	for !p.eof() {
		ch := p.next()
		if ch == '\\' && !p.eof() {
			p.i++ // an escaped newline continues the text
			continue
		}
		if ch == '\n' {
			return
		}
	}
}

// addresses moves past the addresses of a command (one, or two joined by
// a comma) and its negations, and reports whether they held computed text.
func (p *sedParser) addresses() bool {
	computed := p.address()
	p.skip(" \t")
	if !p.eof() && p.peek() == ',' {
		p.i++
		p.skip(" \t")
		if p.address() {
			computed = true
		}
	}
	p.skip(" \t")
	for !p.eof() && p.peek() == '!' {
		p.i++
		p.skip(" \t")
	}
	return computed
}

// address moves past one address (a line number, $, first~step, +N, ~N,
// /regex/ or \cregexc with I and M flags) and reports whether it held
// computed text.
func (p *sedParser) address() bool {
	if p.eof() {
		return false
	}
	computed := false
	switch ch := p.peek(); {
	case ch == '/' || ch == '\\':
		p.i++
		delim := byte('/')
		if ch == '\\' {
			if p.eof() {
				return false
			}
			delim = p.next()
		}
		p.delimited(delim) // computed text in a regex is data
		p.skip("IM")
	case ch == '$' || ch == '+' || ch == '~' || ch >= '0' && ch <= '9' || ch == computedMark:
		for !p.eof() && strings.IndexByte("0123456789$+~\x00", p.peek()) >= 0 {
			if p.peek() == computedMark {
				computed = true
			}
			p.i++
		}
	}
	return computed
}

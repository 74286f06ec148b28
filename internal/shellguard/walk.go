package shellguard

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/countbot/toolsvc/internal/runes"
)

// mode says how strictly a script is judged.
type mode int

const (
	// modeScript is a script that will run: every rule applies.
	modeScript mode = iota
	// modeCode is a string found in inline interpreter code (python3 -c
	// "os.system('...')"). It may be data rather than a command, so only
	// the deny rules apply: not the allowlist, not the rule on computed
	// command names, and a parse failure is not a refusal.
	modeCode
)

// scope is where a script or command is being judged.
type scope struct {
	depth int
	mode  mode
}

// checker holds the state of one Check call.
type checker struct {
	g         *Guard
	launchers map[string]launchRule // launchRules(), built once by New
	total     int                   // script bytes parsed so far
	words     int                   // words of simple commands judged so far
	parses    int                   // scripts parsed so far
	seen      map[any]bool          // nodes already judged
	// renamed maps the base name of a copy or link the script makes of a
	// program the guard has rules for (cp /usr/bin/shred ./s) to that
	// program's name, so that running the copy is judged as the original.
	renamed map[string]string
}

const (
	reasonEmpty    = "empty command"
	reasonComputed = "command name is computed at run time"
)

func block(cmd, reason string) *Blocked { return &Blocked{Command: cmd, Reason: reason} }

// script parses and judges one script at the given nesting depth.
func (c *checker) script(src string, sc scope) *Blocked {
	if sc.depth > MaxDepth {
		return block(src, fmt.Sprintf("commands are nested more than %d levels deep (sh -c, eval, ...)", MaxDepth))
	}
	c.total += len(src)
	if c.parses++; c.total > maxTotalBytes || c.parses > maxParses {
		return block("", "command is too complex to check (nested scripts too large)")
	}
	if b := c.denyPatterns(src, src); b != nil {
		return b
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		// A script the parser rejects cannot be judged command by command.
		// In allowlist mode that means it cannot be shown to hold only
		// allowed commands, so it is refused. In denylist-only mode it is
		// judged by the raw-text patterns alone (the user's, and the strict
		// built-ins on the text with quotes and backslashes removed); the
		// shell will most likely reject it too, and the sandbox holds the
		// rest.
		sq := squash(src)
		if reason, ok := matchRules(strictRules(), sq); ok {
			return block(src, reason)
		}
		if reason, ok := matchRules(unparsedRules(), sq); ok {
			return block(src, reason)
		}
		if sc.mode == modeScript && c.g.AllowlistMode() {
			return block(src, "the command could not be parsed as a shell script, so it cannot be checked against the allowlist ("+parseMsg(err)+")")
		}
		return nil
	}
	if b := c.forkBombs(f); b != nil {
		return b
	}
	if b := c.stmts(f.Stmts, sc); b != nil {
		return b
	}
	// Safety net: any simple command the traversal above did not reach
	// (a node kind it does not know) is judged on its own here.
	var missed *Blocked
	syntax.Walk(f, func(n syntax.Node) bool {
		if missed != nil {
			return false
		}
		if ce, ok := n.(*syntax.CallExpr); ok && !c.seen[ce] {
			missed = c.call(ce, sc)
		}
		return true
	})
	if missed != nil {
		return missed
	}
	if b := c.quotedSubstitutions(f, sc); b != nil {
		return b
	}
	// CountBot's patterns over the raw text, anchored where a command
	// starts: a seatbelt for what the parse may have misread.
	if reason, ok := matchRules(seedRules(), src); ok {
		return block(src, reason)
	}
	return nil
}

func parseMsg(err error) string {
	return runes.Shorten(err.Error(), 120)
}

// denyPatterns matches the configured deny patterns against text.
func (c *checker) denyPatterns(text, cmd string) *Blocked {
	for i, re := range c.g.deny {
		if re.MatchString(text) {
			return block(cmd, "matches deny pattern `"+c.g.denySource[i]+"`")
		}
	}
	return nil
}

func (c *checker) stmts(list []*syntax.Stmt, sc scope) *Blocked {
	for _, s := range list {
		if b := c.stmt(s, sc); b != nil {
			return b
		}
	}
	return nil
}

func (c *checker) stmt(s *syntax.Stmt, sc scope) *Blocked {
	if s == nil {
		return nil
	}
	for _, r := range s.Redirs {
		if b := c.redirect(r, sc); b != nil {
			return b
		}
	}
	if s.Cmd == nil {
		return nil
	}
	switch cmd := s.Cmd.(type) {
	case *syntax.CallExpr:
		return c.call(cmd, sc)
	case *syntax.IfClause:
		return c.ifClause(cmd, sc)
	case *syntax.WhileClause:
		if b := c.stmts(cmd.Cond, sc); b != nil {
			return b
		}
		return c.stmts(cmd.Do, sc)
	case *syntax.ForClause:
		if b := c.nested(cmd.Loop, sc); b != nil {
			return b
		}
		return c.stmts(cmd.Do, sc)
	case *syntax.CaseClause:
		return c.caseClause(cmd, sc)
	case *syntax.Block:
		return c.stmts(cmd.Stmts, sc)
	case *syntax.Subshell:
		return c.stmts(cmd.Stmts, sc)
	case *syntax.BinaryCmd:
		if b := c.stmt(cmd.X, sc); b != nil {
			return b
		}
		return c.stmt(cmd.Y, sc)
	case *syntax.FuncDecl:
		return c.stmt(cmd.Body, sc)
	case *syntax.ArithmCmd, *syntax.TestClause, *syntax.LetClause:
		return c.nested(cmd, sc)
	case *syntax.DeclClause:
		return c.decl(cmd, sc)
	case *syntax.TimeClause:
		return c.stmt(cmd.Stmt, sc)
	case *syntax.CoprocClause:
		return c.coproc(cmd, sc)
	case *syntax.TestDecl:
		if b := c.nested(cmd.Description, sc); b != nil {
			return b
		}
		return c.stmt(cmd.Body, sc)
	default:
		// Fail closed on a construct this version does not know.
		return block(source(cmd), fmt.Sprintf("unsupported shell construct %T", cmd))
	}
}

// ifClause judges the conditions and bodies of an if and all its elif
// and else branches.
func (c *checker) ifClause(cmd *syntax.IfClause, sc scope) *Blocked {
	for ic := cmd; ic != nil; ic = ic.Else {
		if b := c.stmts(ic.Cond, sc); b != nil {
			return b
		}
		if b := c.stmts(ic.Then, sc); b != nil {
			return b
		}
	}
	return nil
}

// caseClause judges a case's word, and each item's patterns and body.
func (c *checker) caseClause(cmd *syntax.CaseClause, sc scope) *Blocked {
	if b := c.nested(cmd.Word, sc); b != nil {
		return b
	}
	for _, it := range cmd.Items {
		for _, p := range it.Patterns {
			if b := c.nested(p, sc); b != nil {
				return b
			}
		}
		if b := c.stmts(it.Stmts, sc); b != nil {
			return b
		}
	}
	return nil
}

// coproc judges a coprocess's name word, if any, and its command.
func (c *checker) coproc(cmd *syntax.CoprocClause, sc scope) *Blocked {
	if cmd.Name != nil {
		if b := c.nested(cmd.Name, sc); b != nil {
			return b
		}
	}
	return c.stmt(cmd.Stmt, sc)
}

// nested judges the command and process substitutions inside a node that
// is not itself a command: a word, an arithmetic or test expression, a
// loop header.
func (c *checker) nested(n syntax.Node, sc scope) *Blocked {
	if n == nil {
		return nil
	}
	var found *Blocked
	syntax.Walk(n, func(n syntax.Node) bool {
		if found != nil {
			return false
		}
		switch n := n.(type) {
		case *syntax.CmdSubst:
			found = c.stmts(n.Stmts, sc)
			return false
		case *syntax.ProcSubst:
			found = c.stmts(n.Stmts, sc)
			return false
		case *syntax.Stmt:
			// Only reached through node kinds that hold statements; judge
			// them as such.
			found = c.stmt(n, sc)
			return false
		}
		return true
	})
	return found
}

// call judges a simple command.
func (c *checker) call(ce *syntax.CallExpr, sc scope) *Blocked {
	if c.seen[ce] {
		return nil
	}
	c.seen[ce] = true
	var target []word // what the assignments are set for
	if len(ce.Assigns) > 0 {
		for _, w := range ce.Args {
			target = append(target, evalWord(w))
		}
	}
	for _, a := range ce.Assigns {
		if b := c.assign(a, target, sc); b != nil {
			return b
		}
	}
	if len(ce.Args) == 0 {
		return nil // only assignments
	}
	for _, w := range ce.Args {
		if b := c.nested(w, sc); b != nil {
			return b
		}
	}
	ws, reason := expandWords(ce.Args)
	if reason != "" {
		return block(source(ce), reason)
	}
	if c.words += len(ws); c.words > maxTotalWords {
		return block("", "command is too complex to check (too many words)")
	}
	return c.command(ws, sc, callCtx{})
}

// assign judges a variable assignment: substitutions in its value, and the
// variables that make commands run other code (see envVar). target are the
// words of the command it prefixes, nil for a plain assignment.
func (c *checker) assign(a *syntax.Assign, target []word, sc scope) *Blocked {
	if b := c.assignParts(a, sc); b != nil {
		return b
	}
	if a.Name != nil && !a.Naked {
		return c.envVar(a.Name.Value, assignValue(a), target, a.Name.Value+"="+valueText(a), sc)
	}
	return nil
}

// assignValue is the value an assignment sets, as a word.
func assignValue(a *syntax.Assign) word {
	switch {
	case a.Value != nil:
		return evalWord(a.Value)
	case a.Array != nil:
		return word{text: source(a.Array)}
	}
	return litWord("")
}

// assignParts judges the substitutions in an assignment's index and value.
func (c *checker) assignParts(a *syntax.Assign, sc scope) *Blocked {
	if a.Index != nil {
		if b := c.nested(a.Index, sc); b != nil {
			return b
		}
	}
	if a.Value != nil {
		if b := c.nested(a.Value, sc); b != nil {
			return b
		}
	}
	if a.Array != nil {
		if b := c.nested(a.Array, sc); b != nil {
			return b
		}
	}
	return nil
}

// decl judges declare/export/local/readonly/typeset: substitutions and
// variable names like an assignment, and the builtin itself like a command.
func (c *checker) decl(d *syntax.DeclClause, sc scope) *Blocked {
	ws := []word{litWord(d.Variant.Value)}
	for _, a := range d.Args {
		if b := c.assignParts(a, sc); b != nil {
			return b
		}
		switch {
		case a.Name != nil && !a.Naked:
			if b := c.envVar(a.Name.Value, assignValue(a), nil, d.Variant.Value+" "+a.Name.Value+"="+valueText(a), sc); b != nil {
				return b
			}
			ws = append(ws, litWord(a.Name.Value+"="+valueText(a)))
		case a.Name != nil:
			if a.Name.Value == "BASH_ENV" {
				return block(d.Variant.Value+" "+a.Name.Value, reasonBashEnv)
			}
			ws = append(ws, litWord(a.Name.Value))
		case a.Value != nil:
			w := evalWord(a.Value)
			if !w.lit && sc.mode == modeScript && c.g.AllowlistMode() {
				// `export $X` may assign any variable.
				return block(d.Variant.Value+" "+w.text, "a variable assigned by "+d.Variant.Value+" is computed at run time")
			}
			if i := strings.IndexByte(w.text, '='); w.lit && i > 0 {
				if b := c.envVar(w.text[:i], litWord(w.text[i+1:]), nil, d.Variant.Value+" "+w.text, sc); b != nil {
					return b
				}
			}
			ws = append(ws, w)
		}
	}
	return c.command(ws, sc, callCtx{})
}

func valueText(a *syntax.Assign) string {
	switch {
	case a.Value != nil:
		return evalWord(a.Value).text
	case a.Array != nil:
		return source(a.Array)
	}
	return ""
}

// redirect judges a redirection: substitutions in its target and here-doc,
// writes to devices, kernel interfaces and system paths, and any use of a
// raw disk device.
func (c *checker) redirect(r *syntax.Redirect, sc scope) *Blocked {
	if r.Hdoc != nil {
		if b := c.nested(r.Hdoc, sc); b != nil {
			return b
		}
	}
	if r.Word == nil {
		return nil
	}
	if b := c.nested(r.Word, sc); b != nil {
		return b
	}
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		return nil // the word is data or a delimiter
	}
	w := evalWord(r.Word)
	target := w.text
	cmd := r.Op.String() + " " + target
	if diskDevice(target) {
		return block(cmd, "raw disk devices must not be read or written")
	}
	write := false
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrInOut, syntax.RdrClob, syntax.AppClob,
		syntax.RdrAll, syntax.RdrAllClob, syntax.AppAll, syntax.AppAllClob:
		write = true
	case syntax.DplOut:
		// >&word writes to a file when word is not a descriptor number or -.
		write = !isDigits(target) && target != "-"
	}
	if !write || !w.lit && w.prefix == "" {
		return nil
	}
	p := target
	if !w.lit {
		p = w.prefix
	}
	if reason := protectedWrite(p); reason != "" {
		return block(cmd, reason)
	}
	return nil
}

// forkBombs refuses a function that starts itself in a pipeline or in the
// background: :(){ :|:& };: under any name. One walk keeps the names of
// the enclosing functions and how many pipelines or background statements
// enclose the current node, so that the cost stays linear.
func (c *checker) forkBombs(f *syntax.File) *Blocked {
	var (
		found *Blocked
		funcs = map[string]int{} // names of the enclosing functions
		decls = map[string]*syntax.FuncDecl{}
		forks int    // enclosing pipelines and background statements
		exits []bool // per entered node: whether it counted in forks
	)
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil {
			last := len(exits) - 1
			if exits[last] {
				forks--
			}
			exits = exits[:last]
			return true
		}
		if found != nil {
			return false
		}
		fork := false
		switch n := n.(type) {
		case *syntax.FuncDecl:
			// Function names stay counted after the declaration ends: a
			// later call in a pipeline is judged by the body's own calls.
			if n.Name != nil {
				funcs[n.Name.Value]++
				decls[n.Name.Value] = n
			}
			for _, l := range n.Names {
				funcs[l.Value]++
				decls[l.Value] = n
			}
		case *syntax.BinaryCmd:
			fork = n.Op == syntax.Pipe || n.Op == syntax.PipeAll
		case *syntax.Stmt:
			fork = n.Background || n.Coprocess || n.Disown
		case *syntax.CallExpr:
			if forks > 0 && len(funcs) > 0 && len(n.Args) > 0 {
				if name := evalWord(n.Args[0]).text; funcs[name] > 0 && inside(decls[name], n) {
					found = block(source(decls[name]), "fork bomb (a function that starts itself in a pipeline or in the background)")
					return false
				}
			}
		}
		if fork {
			forks++
		}
		exits = append(exits, fork)
		return true
	})
	return found
}

// inside reports whether node n lies within the source span of outer.
func inside(outer, n syntax.Node) bool {
	return outer != nil && n.Pos().Offset() >= outer.Pos().Offset() && n.End().Offset() <= outer.End().Offset()
}

// quotedSubstitutions judges, by the deny rules only, the $(...) and
// backtick commands written inside quoted text: data that bash may still
// run, e.g. through arithmetic evaluation of a variable holding
// 'a[$(rm -rf ~)]'.
func (c *checker) quotedSubstitutions(f *syntax.File, sc scope) *Blocked {
	var found *Blocked
	inner := scope{depth: sc.depth + 1, mode: modeCode}
	syntax.Walk(f, func(n syntax.Node) bool {
		if found != nil {
			return false
		}
		var text string
		switch n := n.(type) {
		case *syntax.SglQuoted:
			text = n.Value
			if n.Dollar {
				text = ansiC(text)
			}
		case *syntax.Lit:
			text = n.Value
		default:
			return true
		}
		for _, body := range substitutionBodies(text) {
			if found = c.script(body, inner); found != nil {
				found.Reason += " (in quoted text)"
				return false
			}
		}
		return true
	})
	return found
}

// substitutionBodies returns the commands of the $(...) and `...` found in
// plain text.
func substitutionBodies(s string) []string {
	if !strings.Contains(s, "$(") && !strings.Contains(s, "`") {
		return nil
	}
	var out []string
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '$' && i+1 < len(s) && s[i+1] == '(':
			depth := 0
			for j := i + 1; j < len(s); j++ {
				if s[j] == '(' {
					depth++
				} else if s[j] == ')' {
					if depth--; depth == 0 {
						if body := strings.TrimSpace(s[i+2 : j]); body != "" {
							out = append(out, body)
						}
						i = j
						break
					}
				}
			}
		case s[i] == '`':
			if j := strings.IndexByte(s[i+1:], '`'); j >= 0 {
				if body := strings.TrimSpace(s[i+1 : i+1+j]); body != "" {
					out = append(out, body)
				}
				i += j + 1
			}
		}
	}
	return out
}

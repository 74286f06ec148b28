package shellguard

import (
	"strings"
)

// awkCommand is a command an awk program runs: the argument of system(),
// the right side of `print | cmd` or `print |& cmd`, the left side of
// `cmd | getline`.
type awkCommand struct {
	text     string // the command, when it is one string literal
	computed bool   // the command is an expression computed at run time
	expr     string // the expression as written, for the message
}

// awkProgram judges the commands an awk program runs through /bin/sh: a
// command written as one string literal is judged as a script like any
// other; one computed at run time (a variable, a concatenation) cannot be
// judged and is refused.
func (c *checker) awkProgram(interp, prog, text string, sc scope) *Blocked {
	for _, ac := range awkCommands(prog) {
		if ac.computed {
			if sc.mode == modeCode {
				continue
			}
			return block(text, interp+" runs a command computed at run time ("+shown(ac.expr)+"), which cannot be checked; write the command as one string literal")
		}
		if strings.TrimSpace(ac.text) == "" {
			continue // system("") only flushes output
		}
		if b := c.script(ac.text, scope{depth: sc.depth + 1, mode: sc.mode}); b != nil {
			b.Reason += " (run by " + interp + ")"
			return b
		}
	}
	return nil
}

// awkToken is one token of an awk program.
type awkToken struct {
	kind       byte   // 's' string, 'r' regex, 'n' name, '0' number, 'o' operator or punctuation
	text       string // decoded value of a string; the source of anything else
	start, end int    // offsets in the program
}

// awkCommands finds the commands an awk program runs.
func awkCommands(prog string) []awkCommand {
	toks := awkLex(prog)
	src := func(ts []awkToken) string {
		if len(ts) == 0 {
			return ""
		}
		return prog[ts[0].start:ts[len(ts)-1].end]
	}
	var out []awkCommand
	for i, t := range toks {
		switch {
		case t.kind == 'n' && t.text == "system" && i+1 < len(toks) && toks[i+1].text == "(":
			end := awkClose(toks, i+1)
			out = append(out, awkExpr(toks[i+2:end], src))
		case t.kind == 'o' && (t.text == "|" || t.text == "|&"):
			j := i + 1
			if j < len(toks) && toks[j].kind == 'n' && toks[j].text == "getline" {
				// cmd | getline: the command is the expression before the
				// pipe. One string literal is a literal command unless a
				// value before it is concatenated to it.
				if i > 0 && toks[i-1].kind == 's' && (i < 2 || !awkValue(toks[i-2])) {
					out = append(out, awkCommand{text: toks[i-1].text})
				} else {
					out = append(out, awkCommand{computed: true, expr: src(toks[max(0, i-1) : i+2])})
				}
				continue
			}
			// print ... | cmd: the command runs to the end of the statement.
			end := j
			depth := 0
		scan:
			for ; end < len(toks); end++ {
				switch toks[end].text {
				case "(", "[":
					depth++
				case ")", "]":
					if depth == 0 {
						break scan
					}
					depth--
				case ";", "\n", "}", "{":
					if depth == 0 {
						break scan
					}
				}
			}
			out = append(out, awkExpr(toks[j:end], src))
		}
	}
	return out
}

// awkExpr reads a command expression: one string literal, perhaps in
// parentheses, or something computed.
func awkExpr(toks []awkToken, src func([]awkToken) string) awkCommand {
	for len(toks) >= 2 && toks[0].text == "(" && toks[len(toks)-1].text == ")" && awkClose(toks, 0) == len(toks)-1 {
		toks = toks[1 : len(toks)-1]
	}
	if len(toks) == 1 && toks[0].kind == 's' {
		return awkCommand{text: toks[0].text}
	}
	return awkCommand{computed: true, expr: src(toks)}
}

// awkClose returns the index of the ")" closing the "(" at toks[open], or
// len(toks).
func awkClose(toks []awkToken, open int) int {
	depth := 0
	for k := open; k < len(toks); k++ {
		switch toks[k].text {
		case "(":
			depth++
		case ")":
			if depth--; depth == 0 {
				return k
			}
		}
	}
	return len(toks)
}

// awkKeywords may be followed by a regex literal although they are names.
var awkKeywords = map[string]bool{"print": true, "printf": true, "return": true, "case": true, "in": true, "getline": true}

// awkValue reports whether t ends a value, so that a following '/' divides
// and a following string concatenates.
func awkValue(t awkToken) bool {
	switch t.kind {
	case 's', '0', 'r':
		return true
	case 'n':
		return !awkKeywords[t.text]
	}
	return t.text == ")" || t.text == "]" || t.text == "$" || t.text == "++" || t.text == "--"
}

// awkLex splits an awk program into tokens, skipping comments and line
// continuations. Strings are decoded; a '/' starts a regex unless it
// follows a value.
func awkLex(s string) []awkToken {
	var toks []awkToken
	for i := 0; i < len(s); {
		ch := s[i]
		var t awkToken
		switch {
		case ch == ' ' || ch == '\t' || ch == '\r':
			i++
			continue
		case strings.HasPrefix(s[i:], "\\\n"):
			i += 2
			continue
		case strings.HasPrefix(s[i:], "\\\r\n"):
			i += 3
			continue
		case ch == '#':
			i += awkLineLen(s[i:])
			continue
		case ch == '"':
			t = awkString(s, i)
		case ch == '/' && !(len(toks) > 0 && awkValue(toks[len(toks)-1])):
			t = awkRegex(s, i)
		case awkNameStart(ch):
			t = awkSpan(s, i, 'n', awkNameChar)
		case ch >= '0' && ch <= '9' || ch == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			t = awkSpan(s, i, '0', awkNumberChar)
		default:
			t = awkOperator(s, i)
		}
		toks = append(toks, t)
		i = t.end
	}
	return toks
}

// awkLineLen returns the length of the first line of s, without its newline.
func awkLineLen(s string) int {
	if n := strings.IndexByte(s, '\n'); n >= 0 {
		return n
	}
	return len(s)
}

// awkString reads the string literal starting at s[i] and decodes it.
func awkString(s string, i int) awkToken {
	var sb strings.Builder
	start := i
	for i++; i < len(s) && s[i] != '"'; i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			sb.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			sb.WriteByte('\n')
		case 't':
			sb.WriteByte('\t')
		case '\n':
		default:
			sb.WriteByte(s[i])
		}
	}
	return awkToken{kind: 's', text: sb.String(), start: start, end: min(i+1, len(s))}
}

// awkRegex reads the regex literal starting at s[i]; a '/' inside a
// bracket expression does not end it.
func awkRegex(s string, i int) awkToken {
	start := i
	inBracket := false
	for i++; i < len(s) && s[i] != '\n' && (inBracket || s[i] != '/'); i++ {
		switch s[i] {
		case '\\':
			i++
		case '[':
			inBracket = true
		case ']':
			inBracket = false
		}
	}
	end := min(i+1, len(s))
	return awkToken{kind: 'r', text: s[start:end], start: start, end: end}
}

// awkSpan reads the longest run of bytes accepted by in, starting at s[i].
func awkSpan(s string, i int, kind byte, in func(byte) bool) awkToken {
	start := i
	for i < len(s) && in(s[i]) {
		i++
	}
	return awkToken{kind: kind, text: s[start:i], start: start, end: i}
}

func awkNameStart(ch byte) bool { return ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' }
func awkNameChar(ch byte) bool  { return awkNameStart(ch) || ch >= '0' && ch <= '9' }

// awkNumberChar accepts the bytes of decimal, hexadecimal and exponent
// notation.
func awkNumberChar(ch byte) bool {
	return ch >= '0' && ch <= '9' || ch == '.' || ch == 'x' || ch == 'X' || ch >= 'a' && ch <= 'f' || ch >= 'A' && ch <= 'F'
}

// awkOperator reads the one- or two-byte operator at s[i].
func awkOperator(s string, i int) awkToken {
	op := s[i : i+1]
	if i+1 < len(s) {
		switch two := s[i : i+2]; two {
		case "||", "&&", "|&", "==", "!=", "<=", ">=", "++", "--", "+=", "-=", "*=", "/=", "%=", "^=", ">>", "**":
			op = two
		}
	}
	return awkToken{kind: 'o', text: op, start: i, end: i + len(op)}
}

package shellguard

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// word is one shell word as the guard sees it: its value after quote
// removal when that value is known before run time, or its source text
// when part of it is computed (parameter, command or arithmetic expansion,
// process substitution, globbing).
type word struct {
	text string // decoded value; computed parts appear as their source text
	lit  bool   // the value is fully known: no expansion, no glob
	// dashSafe reports that a computed word cannot start with '-', because a
	// non-empty literal prefix comes before the first computed part.
	dashSafe bool
	// prefix is the literal text before the first computed part.
	prefix string
	// masked is text with each parameter, command or arithmetic expansion
	// replaced by computedMark (globs stay as written); set by evalWord for
	// computed words only.
	masked string
}

// maskedText returns the word's text with computed parts replaced by
// computedMark.
func maskedText(w word) string {
	switch {
	case w.lit:
		return w.text
	case w.masked != "":
		return w.masked
	}
	return w.prefix + string(computedMark)
}

// litWord is a word known before run time.
func litWord(s string) word {
	return word{text: s, lit: true, dashSafe: !strings.HasPrefix(s, "-"), prefix: s}
}

// joinWords is the normalised text of a command: its words joined by
// single spaces.
func joinWords(ws []word) string {
	var sb strings.Builder
	for i, w := range ws {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(w.text)
	}
	return sb.String()
}

// evalWord decodes w the way the shell would, without running anything:
// quotes are removed, backslash escapes and $'...' strings decoded.
func evalWord(w *syntax.Word) word {
	var (
		sb       strings.Builder
		mask     strings.Builder // built only once a part is computed
		masking  bool
		computed bool
		prefix   string
	)
	markComputed := func() {
		if !computed {
			computed = true
			prefix = sb.String()
		}
	}
	startMask := func() {
		if !masking {
			masking = true
			mask.WriteString(sb.String())
		}
	}
	literal := func(v string) {
		sb.WriteString(v)
		if masking {
			mask.WriteString(v)
		}
	}
	expansion := func(n syntax.Node) {
		startMask()
		markComputed()
		sb.WriteString(source(n))
		mask.WriteByte(computedMark)
	}
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			val, globAt := unescapeUnquoted(p.Value)
			if globAt >= 0 {
				startMask() // a glob stays as written in the mask
				literal(val[:globAt])
				markComputed()
				literal(val[globAt:])
			} else {
				literal(val)
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				literal(ansiC(p.Value))
			} else {
				literal(p.Value)
			}
		case *syntax.DblQuoted:
			for _, inner := range p.Parts {
				if l, ok := inner.(*syntax.Lit); ok {
					literal(unescapeDouble(l.Value))
					continue
				}
				expansion(inner)
			}
		default: // ParamExp, CmdSubst, ArithmExp, ProcSubst, ExtGlob, BraceExp
			expansion(part)
		}
	}
	text := sb.String()
	if !computed {
		return litWord(text)
	}
	return word{text: text, prefix: prefix, dashSafe: prefix != "" && prefix[0] != '-', masked: mask.String()}
}

// source prints a node back as shell source. A large node is shown
// abbreviated: printing every level of a deeply nested $(...) in full would
// cost time quadratic in the script's length.
func source(n syntax.Node) string {
	if n.Pos().IsValid() && n.End().IsValid() && n.End().Offset()-n.Pos().Offset() > maxSource {
		switch n.(type) {
		case *syntax.CmdSubst:
			return "$(…)"
		case *syntax.ProcSubst:
			return "<(…)"
		case *syntax.ParamExp:
			return "${…}"
		case *syntax.ArithmExp:
			return "$((…))"
		case *syntax.DblQuoted:
			return `"…"`
		}
		return "…"
	}
	var sb strings.Builder
	if err := syntax.NewPrinter().Print(&sb, n); err != nil {
		return "?"
	}
	return sb.String()
}

// unescapeUnquoted removes backslash escapes from an unquoted literal and
// reports the index (in the result) of the first unescaped glob character,
// or -1.
func unescapeUnquoted(s string) (string, int) {
	if !strings.ContainsAny(s, `\*?[`) {
		return s, -1
	}
	var sb strings.Builder
	globAt := -1
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] != '\n' { // a line continuation vanishes
				sb.WriteByte(s[i])
			}
			continue
		case (c == '*' || c == '?') && globAt < 0:
			globAt = sb.Len()
		case c == '[' && globAt < 0 && strings.IndexByte(s[i+1:], ']') >= 0:
			globAt = sb.Len()
		}
		sb.WriteByte(c)
	}
	return sb.String(), globAt
}

// unescapeDouble removes the backslash escapes that double quotes honour.
func unescapeDouble(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '\\', '$', '`', '"':
				i++
			case '\n':
				i++
				continue
			}
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

// ansiC decodes the body of a bash $'...' string. Decoding stops at a NUL
// byte, as bash's does.
func ansiC(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			sb.WriteByte(c)
			continue
		}
		i++
		e := s[i]
		if b, ok := ansiCSimple(e); ok {
			sb.WriteByte(b)
			continue
		}
		switch e {
		case 'c':
			if i+1 < len(s) {
				i++
				sb.WriteByte(s[i] & 0x1f)
			} else {
				sb.WriteString(`\c`)
			}
		case 'x', 'u', 'U':
			digits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			j := i + 1
			for j < len(s) && j-i-1 < digits && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				sb.WriteByte('\\')
				sb.WriteByte(e)
				continue
			}
			n, _ := strconv.ParseUint(s[i+1:j], 16, 32)
			i = j - 1
			if n == 0 {
				return sb.String()
			}
			if e == 'x' {
				sb.WriteByte(byte(n))
			} else if n <= utf8.MaxRune {
				sb.WriteRune(rune(n))
			}
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j-i < 3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint(s[i:j], 8, 32)
			i = j - 1
			if n&0xff == 0 {
				return sb.String()
			}
			sb.WriteByte(byte(n))
		default:
			sb.WriteByte('\\')
			sb.WriteByte(e)
		}
	}
	return sb.String()
}

// ansiCSimple maps the one-character escapes of $'...' (\n, \t, \e, \\
// and the like) to the byte they stand for.
func ansiCSimple(e byte) (byte, bool) {
	switch e {
	case 'a':
		return '\a', true
	case 'b':
		return '\b', true
	case 'e', 'E':
		return 0x1b, true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	case 'v':
		return '\v', true
	case '\\', '\'', '"', '?':
		return e, true
	}
	return 0, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// expandWords decodes the words of a simple command, performing brace
// expansion the way bash does ({rm,-rf,/x} is three words). It returns a
// reason instead when the command is larger than the guard will look at.
func expandWords(args []*syntax.Word) ([]word, string) {
	out := make([]word, 0, len(args))
	for _, a := range args {
		// SplitBraces rewrites the word it is given; work on a copy so the
		// tree (walked again later) never holds BraceExp nodes.
		cp := &syntax.Word{Parts: a.Parts}
		if !syntax.SplitBraces(cp) {
			out = append(out, evalWord(a))
		} else {
			for w, err := range expand.BracesSeq(nil, cp) {
				if err != nil || len(out) >= maxWords {
					return nil, "brace expansion is too large to check"
				}
				out = append(out, evalWord(w))
			}
		}
		if len(out) > maxWords {
			return nil, "command has too many words to check"
		}
	}
	return out, ""
}

package walk

import (
	"errors"
	"unicode"
	"unicode/utf8"
)

// ErrBadPattern reports a pattern that does not compile: an unclosed '['
// or a '\' at the end.
var ErrBadPattern = errors.New("syntax error in pattern")

// Pattern is a compiled, case-insensitive name pattern: '*' matches any run
// of characters, '?' one character, '[abc]', '[a-z]' one of a set ('[!...]'
// or '[^...]' one not in it) and '\' makes the next character literal. It
// matches a whole entry name, never a path: names have no '/'.
type Pattern struct {
	src    string
	toks   []tok
	all    bool   // the pattern is "*" (or several): everything matches
	suffix []byte // for "*<ASCII literal>": the literal, lower case
	exact  bool   // suffix holds the whole pattern, with no '*' in front
}

type tokKind uint8

const (
	tokLit tokKind = iota
	tokAny
	tokStar
	tokClass
)

type tok struct {
	kind   tokKind
	r      rune // tokLit: the folded rune
	neg    bool // tokClass: negated
	ranges []runeRange
}

type runeRange struct{ lo, hi rune }

// Compile parses a pattern.
func Compile(src string) (*Pattern, error) {
	p := &Pattern{src: src}
	for i := 0; i < len(src); {
		r, n := utf8.DecodeRuneInString(src[i:])
		i += n
		switch r {
		case '*':
			if len(p.toks) == 0 || p.toks[len(p.toks)-1].kind != tokStar {
				p.toks = append(p.toks, tok{kind: tokStar})
			}
		case '?':
			p.toks = append(p.toks, tok{kind: tokAny})
		case '\\':
			if i >= len(src) {
				return nil, ErrBadPattern
			}
			r, n = utf8.DecodeRuneInString(src[i:])
			i += n
			p.toks = append(p.toks, tok{kind: tokLit, r: fold(r)})
		case '[':
			t, rest, err := parseClass(src[i:])
			if err != nil {
				return nil, err
			}
			i = len(src) - len(rest)
			p.toks = append(p.toks, t)
		default:
			p.toks = append(p.toks, tok{kind: tokLit, r: fold(r)})
		}
	}
	p.all = len(p.toks) == 1 && p.toks[0].kind == tokStar
	p.setFastPath()
	return p, nil
}

// setFastPath recognises the most common patterns, "*.go" and plain
// names, whose literal part is ASCII, and matches them with a byte
// comparison.
func (p *Pattern) setFastPath() {
	toks := p.toks
	star := len(toks) > 0 && toks[0].kind == tokStar
	if star {
		toks = toks[1:]
	}
	if len(toks) == 0 {
		return
	}
	lit := make([]byte, 0, len(toks))
	for _, t := range toks {
		if t.kind != tokLit || t.r >= utf8.RuneSelf || 'A' <= t.r && t.r <= 'Z' {
			// Only 'k' and 's' fold to upper case, because non-ASCII
			// runes (the Kelvin sign, the long s) are in their orbits;
			// let the general matcher handle them.
			return
		}
		lit = append(lit, byte(t.r))
	}
	p.suffix, p.exact = lit, !star
}

// String returns the pattern as given.
func (p *Pattern) String() string { return p.src }

// Match reports whether name matches the whole pattern, ignoring case.
func (p *Pattern) Match(name []byte) bool {
	switch {
	case p.all:
		return true
	case p.suffix != nil:
		if len(name) < len(p.suffix) || p.exact && len(name) != len(p.suffix) {
			return false
		}
		tail := name[len(name)-len(p.suffix):]
		for i, c := range tail {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != p.suffix[i] {
				return false
			}
		}
		return true
	}
	return p.match(name)
}

// match is the general matcher: left to right, going back to the last '*'
// on a mismatch, which is linear for patterns with one '*' and at worst
// len(pattern) x len(name).
func (p *Pattern) match(name []byte) bool {
	pi, ni := 0, 0
	starPi, starNi := -1, 0
	for ni < len(name) {
		r, n := utf8.DecodeRune(name[ni:])
		if pi < len(p.toks) {
			t := &p.toks[pi]
			switch t.kind {
			case tokStar:
				starPi, starNi = pi, ni
				pi++
				continue
			case tokAny:
				pi++
				ni += n
				continue
			case tokLit:
				if fold(r) == t.r {
					pi++
					ni += n
					continue
				}
			case tokClass:
				if t.matchClass(r) {
					pi++
					ni += n
					continue
				}
			}
		}
		if starPi < 0 {
			return false
		}
		_, n = utf8.DecodeRune(name[starNi:])
		starNi += n
		pi, ni = starPi+1, starNi
	}
	for pi < len(p.toks) && p.toks[pi].kind == tokStar {
		pi++
	}
	return pi == len(p.toks)
}

// parseClass parses a set after its '[' and returns the rest of the
// pattern after the closing ']'.
func parseClass(s string) (tok, string, error) {
	t := tok{kind: tokClass}
	if len(s) > 0 && (s[0] == '!' || s[0] == '^') {
		t.neg = true
		s = s[1:]
	}
	first := true
	for {
		if len(s) == 0 {
			return t, "", ErrBadPattern
		}
		if s[0] == ']' && !first {
			return t, s[1:], nil
		}
		first = false
		lo, rest, err := classChar(s)
		if err != nil {
			return t, "", err
		}
		s = rest
		hi := lo
		if len(s) >= 2 && s[0] == '-' && s[1] != ']' {
			if hi, rest, err = classChar(s[1:]); err != nil {
				return t, "", err
			}
			s = rest
			if hi < lo {
				return t, "", ErrBadPattern
			}
		}
		t.ranges = append(t.ranges, runeRange{lo, hi})
	}
}

func classChar(s string) (rune, string, error) {
	if s[0] == '\\' {
		s = s[1:]
		if s == "" {
			return 0, "", ErrBadPattern
		}
	}
	r, n := utf8.DecodeRuneInString(s)
	return r, s[n:], nil
}

// matchClass reports whether r, or any rune that is the same letter in
// another case, is in the set.
func (t *tok) matchClass(r rune) bool {
	in := false
	for c := r; ; {
		for _, rg := range t.ranges {
			if rg.lo <= c && c <= rg.hi {
				in = true
				break
			}
		}
		if in {
			break
		}
		if c = unicode.SimpleFold(c); c == r {
			break
		}
	}
	return in != t.neg
}

// fold maps r to one representative of its case-folding orbit (the
// smallest rune in it), so runes that are equal ignoring case fold alike.
func fold(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		if r != 'k' && r != 's' {
			return r
		}
	}
	lowest := r
	for c := unicode.SimpleFold(r); c != r; c = unicode.SimpleFold(c) {
		if c < lowest {
			lowest = c
		}
	}
	return lowest
}

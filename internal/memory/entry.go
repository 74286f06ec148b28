package memory

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// DateLayout is the layout of an entry's date, as CountBot writes it.
const DateLayout = "2006-01-02"

// DefaultSource is the source of entries written outside any channel.
const DefaultSource = "web"

// maxSourceLen bounds the source field, which comes from a request header.
const maxSourceLen = 64

// FoldContent turns content into what one entry line may hold: every line
// break (including the Unicode ones some readers split on) and tab becomes
// a space, other control characters are dropped (a NUL would make the file
// look binary), and the ends are trimmed.
func FoldContent(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\r' || r == '\t' || r == '\v' || r == '\f' ||
			r == '\u0085' || r == '\u2028' || r == '\u2029':
			return ' '
		case unicode.IsControl(r):
			return -1
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

// CleanSource makes a channel name safe for the source field: folded to one
// line, with no "|" (the field separator), bounded, and "web" when empty.
func CleanSource(s string) string {
	s = FoldContent(s)
	s = strings.ReplaceAll(s, "|", "/")
	s = strings.Join(strings.Fields(s), "_")
	if utf8.RuneCountInString(s) > maxSourceLen {
		s = string([]rune(s)[:maxSourceLen])
	}
	if s == "" {
		return DefaultSource
	}
	return s
}

// FormatEntry returns the line (without its newline) that records content
// from source on day.
func FormatEntry(day time.Time, source, content string) string {
	return day.Format(DateLayout) + "|" + CleanSource(source) + "|" + FoldContent(content)
}

// Line is one line of the memory file.
type Line struct {
	N    int    // 1-based line number in the file
	Text string // the line as written, without its line break
	// Date is the entry's date; empty when the line is not an entry in the
	// YYYY-MM-DD|source|content form (a hand-written line).
	Date   string
	Source string
}

// Malformed reports whether the line is not blank and not in the
// YYYY-MM-DD|source|content form.
func (l Line) Malformed() bool { return l.Date == "" && strings.TrimSpace(l.Text) != "" }

// parseLine splits an entry line. ok is false for lines that are not in
// the YYYY-MM-DD|source|content form.
func parseLine(text string) (date, source string, ok bool) {
	d, rest, found := strings.Cut(text, "|")
	if !found || len(d) != len(DateLayout) {
		return "", "", false
	}
	src, _, found := strings.Cut(rest, "|")
	if !found {
		return "", "", false
	}
	if _, err := time.Parse(DateLayout, d); err != nil {
		return "", "", false
	}
	return d, src, true
}

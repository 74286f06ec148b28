package extract

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// blockGap is how many line breaks surround a block element in plain text:
// 2 leaves a blank line (paragraphs, headings), 1 starts a new line.
var blockGap = map[string]int{
	"p": 2, "h1": 2, "h2": 2, "h3": 2, "h4": 2, "h5": 2, "h6": 2,
	"ul": 2, "ol": 2, "dl": 2, "table": 2, "blockquote": 2, "pre": 2,
	"figure": 2, "hr": 2, "section": 2, "article": 2, "header": 2, "footer": 2,
	"aside": 2, "nav": 2, "main": 2, "details": 2, "address": 2, "fieldset": 2, "form": 2,
	"div": 1, "li": 1, "tr": 1, "dt": 1, "dd": 1, "figcaption": 1, "summary": 1,
	"caption": 1, "center": 1, "thead": 1, "tbody": 1, "tfoot": 1,
}

// skipped elements carry no reader-visible text.
var skipped = map[string]bool{
	"script": true, "style": true, "template": true, "noscript": true,
	"head": true, "svg": true, "iframe": true, "object": true, "select": true,
}

// PlainText renders the text of n as a reader sees it: inline whitespace
// collapsed, blocks on their own lines, list items with "- ", table cells
// separated by " | ", <pre> kept verbatim.
func PlainText(n *html.Node) string {
	var w textWriter
	w.walk(n)
	return w.b.String()
}

type textWriter struct {
	b       strings.Builder
	breaks  int  // line breaks owed before the next text
	space   bool // a space owed before the next text
	started bool // any text written yet
}

func (w *textWriter) gap(n int) {
	if n > w.breaks {
		w.breaks = n
	}
	w.space = false
}

func (w *textWriter) flush() {
	if w.started && w.breaks > 0 {
		w.b.WriteString(strings.Repeat("\n", w.breaks))
	} else if w.started && w.space {
		w.b.WriteByte(' ')
	}
	w.breaks, w.space = 0, false
}

func (w *textWriter) text(s string) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		if s != "" && w.started {
			w.space = true
		}
		return
	}
	// Any Unicode space at an edge (a no-break space, a thin space, an
	// ideographic space) is a word gap next to the neighbouring element.
	if first, _ := utf8.DecodeRuneInString(s); unicode.IsSpace(first) {
		w.space = true
	}
	w.flush()
	w.b.WriteString(strings.Join(fields, " "))
	w.started = true
	last, _ := utf8.DecodeLastRuneInString(s)
	w.space = unicode.IsSpace(last)
}

func (w *textWriter) raw(s string) {
	if s == "" {
		return
	}
	w.flush()
	w.b.WriteString(s)
	w.started = true
}

func (w *textWriter) walk(n *html.Node) {
	switch n.Type {
	case html.TextNode:
		w.text(n.Data)
		return
	case html.ElementNode:
	default:
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			w.walk(c)
		}
		return
	}
	tag := n.Data
	if skipped[tag] {
		return
	}
	switch tag {
	case "br":
		w.gap(1)
		return
	case "pre":
		w.gap(2)
		w.raw(strings.TrimRight(rawText(n), "\n"))
		w.gap(2)
		return
	case "td", "th":
		if prevElement(n) {
			w.flush()
			w.b.WriteString(" | ")
			w.space = false
		}
	case "img":
		return
	}
	gap := blockGap[tag]
	if gap > 0 {
		w.gap(gap)
	}
	if tag == "li" {
		w.flush()
		w.b.WriteString(listMarker(n))
		w.started = true
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.walk(c)
	}
	if gap > 0 {
		w.gap(gap)
	}
}

// prevElement reports whether a table cell follows another cell of its row.
func prevElement(n *html.Node) bool {
	for p := n.PrevSibling; p != nil; p = p.PrevSibling {
		if p.Type == html.ElementNode {
			return true
		}
	}
	return false
}

func rawText(n *html.Node) string {
	var b strings.Builder
	eachText(n, func(t *html.Node) { b.WriteString(t.Data) })
	return b.String()
}

// listMarker is "- " for an unordered list item, "3. " for the third item
// of an ordered list.
func listMarker(li *html.Node) string {
	if li.Parent == nil || li.Parent.Data != "ol" {
		return "- "
	}
	n := 1
	for p := li.PrevSibling; p != nil; p = p.PrevSibling {
		if p.Type == html.ElementNode && p.Data == "li" {
			n++
		}
	}
	return strconv.Itoa(n) + ". "
}

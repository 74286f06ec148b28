// Package extract turns a fetched web page into the readable text a model
// needs: the main content of an HTML page (trafilatura first, readability as
// the fallback) as plain text or Markdown, JSON pretty-printed, and any
// charset decoded to UTF-8. It does no I/O.
package extract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	mdconv "github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"github.com/countbot/toolsvc/internal/extract/trafilatura"
	"github.com/go-shiori/go-readability"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/text/unicode/norm"
)

// Mode is the output form of an HTML page.
type Mode string

// The extraction modes web_fetch offers.
const (
	ModeText     Mode = "text"
	ModeMarkdown Mode = "markdown"
)

// Extractor names reported in results.
const (
	ByTrafilatura = "trafilatura"
	ByReadability = "readability"
	ByJSON        = "json"
	ByRaw         = "raw"
)

// goodEnough is the length (in characters, blanks aside) of main text under
// which trafilatura's answer is compared with readability's: below it
// trafilatura may have picked a teaser or a cookie banner.
const goodEnough = 250

// shortArticle is the length (characters, blanks aside) of main text under
// which trafilatura's answer is weighed against readability's by
// preferSecond when boilerplate had to be trimmed from it and it has no
// heading left: that is the shape of trafilatura's answer for a short
// news item inside a portal, where it gathers the page's stray paragraphs
// (weather boxes, tip-off appeals, footers) around it rather than the
// article's container.
const shortArticle = 1000

// muchLonger reports a second answer with more than twice as much text
// that is not boilerplate (good) as the first's firstSize: trafilatura then took
// a piece of the page (the lead, a teaser, the comments) for the article,
// and the article is what readability found. It is go-trafilatura's own
// rule for its fallback. On go-trafilatura's comparison benchmark
// (scripts/bench-extract-public.sh) it lifted toolsvc's score by 0.006
// (F 0.901 to 0.907), at the cost of running readability on most pages
// (all but those with too little text for it to win).
func muchLonger(firstSize, good int) bool { return good > 2*firstSize }

// beatsRescued reports a second answer better than trafilatura's rescue:
// one with goodEnough text or more that is not boilerplate (good), and more than
// twice what trafilatura's own extraction found (own). The rescue is the
// page's text run together (a menu, or the whole page, when nothing else
// matched); go-trafilatura with its fallback weighs readability against
// its own extraction the same way, before any rescue.
func beatsRescued(own, good int) bool { return good >= goodEnough && good > 2*own }

// preferSecond chooses readability's answer (second) over trafilatura's
// (first, nil when it found nothing) by their quality, not their length
// alone (both have had their edges trimmed). A short first answer (under
// goodEnough) loses to one with more text that is not boilerplate. Past
// that, the first loses to a second that tells the same article (most of
// the second's text is in the first) when the first carries much more
// besides, or has lost its paragraphs (see flattened).
func preferSecond(first *html.Node, firstSize int, short bool, second *html.Node) bool {
	sb := blocksOf(second)
	good := goodText(sb)
	if first == nil {
		return good > 0
	}
	if short {
		return good > goodText(blocksOf(first))
	}
	if good < 100 || covered(sb, cleanSpace(PlainText(first))) < 0.8 {
		return false
	}
	if firstSize*10 > good*13 {
		return true
	}
	fb := blocksOf(first)
	return len(fb) == 1 && len(sb) >= 3
}

// DefaultMaxChars is how much of a page's text is analysed by default. Past
// a few hundred thousand characters trafilatura's time grows with the
// square of the length (about 2 s for 1 MB of text, 20 s for 4 MB), and a
// model is never shown more than web_fetch's 200,000 characters anyway.
const DefaultMaxChars = 300000

// Options configure an Extractor.
type Options struct {
	// MaxChars is the text (outside scripts and styles) analysed per page;
	// the rest of the document is dropped first. 0 means DefaultMaxChars.
	MaxChars int
}

// Page is the readable content of a page.
type Page struct {
	Title     string
	Text      string
	Extractor string
	// Cut reports that the page had more than MaxChars of text and only its
	// beginning was analysed.
	Cut bool
}

// Extractor converts HTML to text or Markdown. It is safe for concurrent
// use; build one and share it.
type Extractor struct {
	md       *mdconv.Converter
	maxChars int
	// primary is trafilatura.ExtractDocument; tests replace it to reach
	// the fallback.
	primary func(*html.Node, trafilatura.Options) (*trafilatura.ExtractResult, error)
}

// New returns an Extractor.
func New(opts Options) *Extractor {
	if opts.MaxChars <= 0 {
		opts.MaxChars = DefaultMaxChars
	}
	return &Extractor{
		maxChars: opts.MaxChars,
		primary:  trafilatura.ExtractDocument,
		md: mdconv.NewConverter(mdconv.WithPlugins(
			base.NewBasePlugin(),
			commonmark.NewCommonmarkPlugin(),
			table.NewTablePlugin(),
			strikethrough.NewStrikethroughPlugin(),
		)),
	}
}

// HTML extracts the main content of a UTF-8 HTML page. pageURL (may be
// nil) makes relative links absolute. An error means neither extractor found
// any text; the caller may still report the title.
func (e *Extractor) HTML(ctx context.Context, body []byte, pageURL *url.URL, mode Mode) (Page, error) {
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		return Page{}, fmt.Errorf("parse HTML: %w", err)
	}
	title := docTitle(doc)
	cut := cutAfter(doc, e.maxChars) <= 0

	// Reshape the page as a browser shows it (see prepare.go); readability,
	// when it runs, gets the same page, less the space marks.
	bold := map[string]bool{}
	mergeSplitBlocks(doc)
	paragraphs(doc)
	flattenListItems(doc, bold)
	protectPre(doc, false)
	markSpaces(doc)
	content, trTitle, rescuedFrom, trErr := e.primaryContent(doc, pageURL, bold)
	if trTitle != "" {
		title = trTitle
	}
	by := ByTrafilatura
	trSize, trimmed := 0, 0
	if content != nil {
		trSize, trimmed = trimEdges(content)
	}
	// The length test is on the answer as trafilatura gave it, as before
	// trimming: a short article that only lost its footer is fine.
	short := trSize+trimmed < goodEnough
	suspect := short || trimmed > 0 && trSize < shortArticle && !hasHeading(content) || flattened(content)
	if ctx.Err() != nil {
		return Page{}, ctx.Err()
	}
	if second, secondTitle := secondContent(doc, pageURL, content, trSize, short, suspect, rescuedFrom); second != nil {
		content, by = second, ByReadability
		if title == "" {
			title = secondTitle
		}
	}
	best := Page{Title: title, Extractor: by}
	if content != nil {
		trimJunkEdges(content)
		dropDeadLinks(content)
		if best.Text, err = e.render(ctx, content, pageURL, mode); err != nil {
			best.Text = ""
		}
	}
	best.Cut = cut
	best.Title = cleanSpace(best.Title)
	if best.Title == "" {
		best.Title = cleanSpace(title)
	}
	best.Text = tidy(best.Text, mode == ModeMarkdown)
	if best.Text == "" {
		if trErr != nil {
			return best, fmt.Errorf("no readable text: %w", trErr)
		}
		return best, errors.New("no readable text")
	}
	return best, nil
}

// primaryContent runs trafilatura on doc, reshaped and marked as HTML
// prepares it, and readies the content it found (nil when none) for
// rendering. title is the title trafilatura found, "" when none.
// rescuedFrom is -1, or, when trafilatura's own extraction found too
// little (under its minimum of 250 characters) and content is its rescue
// (the JSON-LD article body, the first <article>, the page's paragraphs
// or its whole text, run together), what its own extraction found.
func (e *Extractor) primaryContent(doc *html.Node, pageURL *url.URL, bold map[string]bool) (content *html.Node, title string, rescuedFrom int, err error) {
	tr, err := e.primary(doc, trafilatura.Options{
		OriginalURL:     pageURL,
		IncludeLinks:    true, // PlainText drops the targets; trafilatura is faster this way
		ExcludeComments: true,
		Focus:           trafilatura.Balanced,
	})
	rescuedFrom = -1
	if err == nil && tr != nil && tr.ContentNode != nil {
		content = tr.ContentNode
		if tr.Baseline {
			rescuedFrom = tr.OwnLength
		}
		restoreCode(content)
		unmarkSpaces(content)
		emboldenLinks(content, bold)
		title = strings.ReplaceAll(tr.Metadata.Title, spaceMark, " ")
	}
	return content, title, rescuedFrom, err
}

// secondContent runs readability on doc and returns its content, with
// its title, when it is much longer than trafilatura's (content, of
// trSize characters) or, where trafilatura's answer is suspect, when
// preferSecond prefers it (short if under goodEnough), or, when
// trafilatura's answer is its rescue (rescuedFrom, see primaryContent),
// when it beats what trafilatura's own extraction found; nil when not.
func secondContent(doc *html.Node, pageURL *url.URL, content *html.Node, trSize int, short, suspect bool, rescuedFrom int) (*html.Node, string) {
	// trafilatura worked on a clone; readability gets the page as it
	// was before the space marks and the <pre> protection.
	unmarkSpaces(doc)
	protectPre(doc, true)
	// Readability cannot find more than twice trafilatura's text on a page
	// that has less than that in all: there it runs only to weigh a
	// suspect answer or a rescue.
	if total, _ := textSize(doc); !suspect && rescuedFrom < 0 && total <= 2*trSize {
		return nil, ""
	}
	// readability works on a clone; doc is intact. It is content with
	// a short article: by default it runs up to four times on pages
	// with under 500 characters of text, each time keeping more of
	// the page, and returns the longest answer.
	rd := readability.NewParser()
	rd.CharThresholds = goodEnough / 2
	art, err := rd.ParseDocument(doc, pageURL)
	if err != nil || art.Node == nil {
		return nil, ""
	}
	trimEdges(art.Node)
	good := goodText(blocksOf(art.Node))
	if !muchLonger(trSize, good) && !(suspect && preferSecond(content, trSize, short, art.Node)) &&
		!(rescuedFrom >= 0 && beatsRescued(rescuedFrom, good)) {
		return nil, ""
	}
	return art.Node, strings.TrimSpace(art.Title)
}

// render gives a content node as Markdown, or as plain text with its
// paragraphs, list items and table rows on their own lines.
func (e *Extractor) render(ctx context.Context, n *html.Node, pageURL *url.URL, mode Mode) (string, error) {
	if n == nil {
		return "", errors.New("no content")
	}
	if mode != ModeMarkdown {
		return PlainText(n), nil
	}
	opts := []mdconv.ConvertOptionFunc{mdconv.WithContext(ctx)}
	if pageURL != nil {
		opts = append(opts, mdconv.WithDomain(pageURL.Scheme+"://"+pageURL.Host))
	}
	out, err := e.md.ConvertNode(n, opts...)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// docTitle is the text of the first <title>.
func docTitle(n *html.Node) string {
	if n.Type == html.ElementNode && n.Data == "title" {
		var b strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.TextNode {
				b.WriteString(c.Data)
			}
		}
		return b.String()
	}
	if n.Type == html.ElementNode && (n.Data == "body" || n.Data == "svg") {
		return ""
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if t := docTitle(c); t != "" {
			return t
		}
	}
	return ""
}

// tidy trims trailing spaces and runs of blank lines, which cost a model
// tokens and carry nothing. In Markdown the two spaces of a hard line break
// (a <br> inside a paragraph) are kept: without them the lines run together
// into one when the Markdown is shown.
//
// Soft hyphens (U+00AD) go too: they are only hints where a browser may
// break a word, invisible otherwise, and left in they split words, so the
// text no longer matches what the reader sees or searches for. For the
// same reason the text is put in Unicode's composed form (NFC): a page
// written with "u" and a combining diaeresis shows "ü", and a model or a
// search for "geprüft" should find it.
func tidy(s string, markdown bool) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\u00ad", "")
	s = norm.NFC.String(s)
	var b strings.Builder
	b.Grow(len(s))
	blank, started := false, false
	for rest := s; rest != ""; {
		line := rest
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		t := strings.TrimRight(line, " \t")
		if t == "" {
			blank = started
			continue
		}
		if started {
			if blank {
				b.WriteString("\n\n")
			} else {
				b.WriteByte('\n')
			}
		}
		b.WriteString(t)
		blank, started = false, true
		if markdown && strings.HasSuffix(line, "  ") && strings.TrimLeft(firstLine(rest), " \t") != "" {
			b.WriteString("  ")
		}
	}
	return strings.TrimSpace(b.String())
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func cleanSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// JSON pretty-prints a JSON document with two-space indentation. Numbers
// keep their spelling; invalid JSON is an error (the caller may fall back
// to the raw text).
//
// Indentation grows with depth on every line, so deeply nested input
// (18 KB of brackets would indent to 160 MB) is compacted instead when
// pretty-printing would make it more than jsonGrowth times larger.
func JSON(body []byte) (string, error) {
	body = bytes.TrimSpace(body)
	var buf bytes.Buffer
	if indentedSize(body) > jsonGrowth*len(body)+jsonSlack {
		if err := json.Compact(&buf, body); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	if err := json.Indent(&buf, body, "", "  "); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// jsonGrowth and jsonSlack bound pretty-printed JSON to eight times the
// document plus 64 KiB; ordinary API responses grow two to four times.
const (
	jsonGrowth = 8
	jsonSlack  = 64 << 10
)

// indentedSize is an upper bound of the size of body indented by two
// spaces per level: a line break and the indentation after every opening
// bracket, comma and before every closing bracket, a space after colons.
func indentedSize(body []byte) int {
	size, depth := len(body), 0
	inString, escaped := false, false
	for _, c := range body {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			size += 1 + 2*depth
		case c == ',':
			size += 1 + 2*depth
		case c == '}' || c == ']':
			depth = max(depth-1, 0)
			size += 1 + 2*depth
		case c == ':':
			size++
		}
	}
	return size
}

// VisibleTextLen is a rough count of the characters a reader would see in
// an HTML page without running its scripts: text outside script, style,
// template, noscript and head. It tells a page rendered by JavaScript from
// one that is merely short.
func VisibleTextLen(body []byte) int {
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		return 0
	}
	n := 0
	var walk func(*html.Node)
	walk = func(x *html.Node) {
		if x.Type == html.ElementNode {
			switch x.Data {
			case "script", "style", "template", "noscript", "head":
				return
			}
		}
		if x.Type == html.TextNode {
			n += utf8.RuneCountInString(strings.TrimSpace(x.Data))
		}
		for c := x.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return n
}

// Whitespace inside <pre> is meaning (code indentation, line breaks), but
// trafilatura collapses it like any other text and drops invisible
// characters. Before trafilatura runs it is swapped for the visible control
// pictures (U+2424, U+2420, U+2409), and swapped back inside code afterwards.
var (
	preProtect   = strings.NewReplacer("\n", "\u2424", " ", "\u2420", "\t", "\u2409")
	preUnprotect = strings.NewReplacer("\u2424", "\n", "\u2420", " ", "\u2409", "\t")
)

// protectPre marks the whitespace of every <pre> under n (undo: true
// restores it).
func protectPre(n *html.Node, undo bool) {
	if n.Type == html.ElementNode && n.Data == "pre" {
		r := preProtect
		if undo {
			r = preUnprotect
		}
		eachText(n, func(t *html.Node) { t.Data = r.Replace(t.Data) })
		return
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		protectPre(c, undo)
	}
}

// restoreCode undoes protectPre in trafilatura's output, where <pre> has
// become <code>: the whitespace comes back, and a code element that spans
// lines becomes a <pre> block again.
func restoreCode(n *html.Node) {
	if n.Type == html.ElementNode && (n.Data == "code" || n.Data == "pre") {
		multiline := false
		eachText(n, func(t *html.Node) {
			t.Data = preUnprotect.Replace(t.Data)
			multiline = multiline || strings.Contains(t.Data, "\n")
		})
		if multiline && n.Data == "code" {
			n.Data, n.DataAtom = "pre", atom.Pre
		}
		return
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		restoreCode(c)
	}
}

func eachText(n *html.Node, fn func(*html.Node)) {
	if n.Type == html.TextNode {
		fn(n)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		eachText(c, fn)
	}
}

// cutAfter drops everything in n after the first budget characters of
// reader-visible text and returns the budget left (0 or less: something was
// dropped).
func cutAfter(n *html.Node, budget int) int {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		if budget <= 0 {
			n.RemoveChild(c)
			c = next
			continue
		}
		switch {
		case c.Type == html.TextNode:
			budget -= utf8.RuneCountInString(strings.TrimSpace(c.Data))
		case c.Type == html.ElementNode && skipped[c.Data]:
		default:
			budget = cutAfter(c, budget)
		}
		c = next
	}
	return budget
}

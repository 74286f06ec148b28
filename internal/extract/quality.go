package extract

import (
	"slices"
	"strings"
	"unicode"

	"golang.org/x/net/html"
)

// How the two extractors' answers are judged. trafilatura is the better
// extractor on ordinary articles and stays the default. Boilerplate is
// trimmed from the edges of its answer (trimEdges). Readability's answer
// replaces it when it has more than twice the text (muchLonger:
// trafilatura took a piece of the page for the article). Where
// trafilatura's answer is suspect, readability's is also weighed by
// quality (preferSecond): when it is short, when it is trafilatura's
// flattened last resort (a whole <article> or the JSON-LD body as one
// paragraph), or when it is short, lost boilerplate to the trim and has
// no heading left: the stray paragraphs of a portal gathered around a
// short news item.

// boilerplate lists the words of site furniture, lower case: copyright
// lines, sign-up boxes, share bars, cookie notices, app promotions.
var boilerplate = []string{
	"©", "all rights reserved", "privacy policy", "privacy settings", "privacy notice",
	"terms of use", "terms of service", "terms and conditions", "cookie policy", "cookie settings",
	"cookie preferences", "sign up for", "sign in to", "subscribe to", "subscribe for", "subscribe now",
	"newsletter", "share on", "share this", "follow us", "app store", "google play", "download it free",
	"download the app", "download our app", "版权所有", "关于我们", "联系我们", "免责声明",
	// Affiliate and advertising disclosures, which sites put under their
	// articles.
	"advertising disclosure", "advertising disclaimer", "affiliate links", "may earn a commission",
	"may receive compensation",
}

// adLabels are whole lines that label an advertisement, lower case, in the
// languages of the pages toolsvc is measured on and a few more.
var adLabels = []string{
	"advertisement", "advertising", "sponsored", "anzeige", "werbung", "publicidad", "publicité",
	"pubblicità", "reklama", "reklame", "advertentie", "annons", "mainos", "广告", "広告", "광고",
}

func isBoilerplate(s string) bool {
	s = strings.ToLower(s)
	for _, w := range boilerplate {
		if strings.Contains(s, w) {
			return true
		}
	}
	// Whole lines that are furniture: "Advertisement" ("- Anzeige -"),
	// "12 comments", "Read more", "(c) 2026 ...".
	switch s {
	case "read more", "see more":
		return true
	}
	if slices.Contains(adLabels, strings.TrimFunc(s, func(r rune) bool { return !unicode.IsLetter(r) })) {
		return true
	}
	if strings.HasPrefix(s, "(c) ") {
		return true
	}
	n := strings.TrimLeft(s, "0123456789")
	return n != s && (n == " comment" || n == " comments")
}

// block is one paragraph-like piece of an answer.
type block struct {
	node  *html.Node
	text  int // characters, blanks aside
	links int // of which inside links
}

func (b block) heading() bool { return isHeading(b.node) }

// isHeading reports an h1-h6 element (by name: trafilatura renames
// elements without their atom).
func isHeading(n *html.Node) bool {
	d := n.Data
	return n.Type == html.ElementNode && len(d) == 2 && d[0] == 'h' && d[1] >= '1' && d[1] <= '6'
}

// leadIn reports a short line that announces what follows ("Also in the
// news:"): at the end of an answer, what it announced was cut.
func (b block) leadIn() bool {
	if b.text > 80 {
		return false
	}
	t := strings.TrimRightFunc(rawText(b.node), unicode.IsSpace)
	return strings.HasSuffix(t, ":") || strings.HasSuffix(t, "：")
}

// junk reports site furniture: a block mostly of links (menus, share bars,
// lists of other stories), a short one in the words of boilerplate, or a
// menu written as text ("Home | News | About us").
func (b block) junk() bool {
	if b.heading() {
		return false
	}
	if b.links*10 >= b.text*6 {
		return true
	}
	if b.text >= 400 {
		return false
	}
	raw := rawText(b.node)
	if b.text < 300 && isBoilerplate(cleanSpace(strings.ReplaceAll(raw, spaceMark, " "))) {
		return true
	}
	bars := strings.Count(raw, "|")
	return bars >= 3 && b.text < 30*(bars+1)
}

// furniture is junk for trimJunkEdges: a block of links counts only when
// links make 80% of its text or more, so that a closing line of the
// article that points to more ("read the full proposal on the council's
// site, or see our map") stays.
func (b block) furniture() bool {
	if !b.heading() && b.links*10 >= b.text*6 && b.links*10 < b.text*8 {
		return false
	}
	return b.junk()
}

// isBlockTag reports the elements judged as a whole.
func isBlockTag(n *html.Node) bool {
	switch n.Data { // by name: trafilatura renames elements without their atom
	case "p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "dl", "table", "blockquote", "pre", "figure", "code":
		return true
	}
	return false
}

// blocksOf lists the blocks of an answer in reading order: its paragraphs,
// headings, lists and tables, looking through the divs around them.
func blocksOf(n *html.Node) []block {
	var out []block
	var walk func(*html.Node)
	walk = func(x *html.Node) {
		for c := x.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode || skipped[c.Data] {
				continue
			}
			if isBlockTag(c) || !hasBlockChild(c) {
				if total, links := textSize(c); total > 0 {
					out = append(out, block{node: c, text: total, links: links})
				}
				continue
			}
			walk(c)
		}
	}
	if n != nil {
		walk(n)
	}
	return out
}

func hasBlockChild(n *html.Node) bool {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && !isInline(c) && c.Data != "br" {
			return true
		}
	}
	return false
}

// trimEdges removes boilerplate blocks from the start and the end of an
// answer (never from its middle, where a list of links may be the point of
// the article), and the headings and lead-ins left with nothing after them. It acts only
// when the boilerplate is a fair share of the answer, so a long article
// keeps its closing "further reading" list. It reports the size of what is
// left and of what it removed, in characters, blanks aside.
func trimEdges(n *html.Node) (kept, removed int) {
	bs := blocksOf(n)
	total := 0
	for _, b := range bs {
		total += b.text
	}
	start, end := edges(bs, func(b block) bool { return b.heading() || b.leadIn() || b.junk() }, block.junk)
	for _, b := range bs[:start] {
		removed += b.text
	}
	for _, b := range bs[end:] {
		removed += b.text
	}
	if start == end || removed*100 < total*15 {
		return total, 0
	}
	cutEdges(bs, start, end)
	return total - removed, removed
}

// trimJunkEdges removes the furniture at the edges of a chosen answer
// however little of it there is: a "back to the list" link, a closing
// box of links. trimEdges leaves small amounts in place, since what it
// trims also says how suspect trafilatura's answer is.
func trimJunkEdges(n *html.Node) {
	bs := blocksOf(n)
	start, end := edges(bs, func(b block) bool { return b.heading() || b.furniture() }, block.furniture)
	if start < end {
		cutEdges(bs, start, end)
	}
}

// edges returns the blocks to keep, bs[start:end]: the ones left after
// those tail reports are dropped from the end and those head reports from
// the start.
func edges(bs []block, tail, head func(block) bool) (start, end int) {
	end = len(bs)
	for end > 0 && tail(bs[end-1]) {
		end--
	}
	for start < end && head(bs[start]) {
		start++
	}
	return start, end
}

// cutEdges removes the blocks outside bs[start:end] from their tree, and
// the loose lead-ins left after the last one kept.
func cutEdges(bs []block, start, end int) {
	for _, b := range append(bs[:start:start], bs[end:]...) {
		if b.node.Parent != nil {
			b.node.Parent.RemoveChild(b.node)
		}
	}
	if end < len(bs) {
		dropLooseLeadIns(bs[end-1].node)
	}
}

// dropLooseLeadIns removes the bare text left after the last kept block
// when it only announced what was trimmed ("Also in the news:"):
// trafilatura leaves text between blocks loose.
func dropLooseLeadIns(last *html.Node) {
	for t := last.NextSibling; t != nil; {
		next := t.NextSibling
		if t.Type == html.TextNode {
			s := strings.TrimFunc(strings.ReplaceAll(t.Data, spaceMark, " "), unicode.IsSpace)
			if s == "" || len(s) <= 120 && (strings.HasSuffix(s, ":") || strings.HasSuffix(s, "：") || isBoilerplate(s)) {
				t.Parent.RemoveChild(t)
			}
		}
		t = next
	}
}

// hasHeading reports a heading in n, or n itself one.
func hasHeading(n *html.Node) bool { return isHeading(n) || firstHeading(n) != nil }

// flattened reports trafilatura's last resort when it kept a whole
// article (or the JSON-LD article body) as one long paragraph of bare text:
// its headings, paragraphs and links are gone, and with a short article
// inside a portal, the portal's menus and footers are in it.
func flattened(n *html.Node) bool {
	if n == nil {
		return false
	}
	var only *html.Node
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode {
			continue
		}
		if only != nil || c.Data != "p" {
			return false
		}
		only = c
	}
	if only == nil || only.FirstChild == nil || only.FirstChild != only.LastChild || only.FirstChild.Type != html.TextNode {
		return false
	}
	size, _ := textSize(only)
	return size >= flatParagraph
}

// flatParagraph is the length (characters, blanks aside) from which a
// single paragraph of bare text is taken for a flattened article.
const flatParagraph = 500

// covered is the share (0 to 1) of the text of part's blocks found in
// whole: 1 when the two answers agree on the article.
func covered(part []block, whole string) float64 {
	in, all := 0, 0
	for _, b := range part {
		if b.text < 20 || b.heading() || b.junk() {
			continue
		}
		all += b.text
		if strings.Contains(whole, cleanSpace(PlainText(b.node))) {
			in += b.text
		}
	}
	if all == 0 {
		return 0
	}
	return float64(in) / float64(all)
}

// goodText is the number of characters of an answer's blocks that are
// not boilerplate.
func goodText(bs []block) int {
	n := 0
	for _, b := range bs {
		if !b.junk() {
			n += b.text
		}
	}
	return n
}

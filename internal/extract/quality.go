package extract

import (
	"regexp"
	"strings"

	"golang.org/x/net/html"
)

// How the two extractors' answers are judged. trafilatura is the better
// extractor on ordinary articles and stays the default; its answer is
// doubted when it is short, when it is trafilatura's last resort (every <p>
// of the page, or a whole <article> as one paragraph, taken when the
// article it found had under 250 characters: a short news item inside a
// portal came back with the portal's footer), or when boilerplate fills its
// edges.

// boilerplate matches the phrases of site furniture: copyright lines,
// sign-up boxes, share bars, cookie notices, app promotions.
var boilerplate = regexp.MustCompile(`(?i)©|\(c\) \d{4}|\ball rights reserved\b|\bprivacy (policy|settings|notice)\b|\bterms (of|and conditions)\b|\bcookie (policy|settings|preferences)\b|\bsign (up|in) for\b|\bsubscribe (to|for|now)\b|\bnewsletter\b|\bshare (on|this)\b|\bfollow us\b|\bapp store\b|\bgoogle play\b|\bdownload (it|the app|our app)\b|^advertisement$|^\d+ comments?$|^(read|see) more$|版权所有|关于我们|联系我们|免责声明`)

// block is one paragraph-like piece of an answer.
type block struct {
	node    *html.Node
	heading bool
	text    int // characters, blanks aside
	junk    bool
}

// blockTags are the elements judged as a whole.
var blockTags = map[string]bool{
	"p": true, "h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true,
	"ul": true, "ol": true, "dl": true, "table": true, "blockquote": true, "pre": true,
	"figure": true, "code": true,
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
			if blockTags[c.Data] || !hasBlockChild(c) {
				if b := judge(c); b.text > 0 {
					out = append(out, b)
				}
				continue
			}
			walk(c)
		}
	}
	walk(n)
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

func judge(n *html.Node) block {
	total, links := textSize(n)
	b := block{node: n, text: total, heading: len(n.Data) == 2 && n.Data[0] == 'h' && n.Data[1] >= '1' && n.Data[1] <= '6'}
	if total == 0 || b.heading {
		return b
	}
	switch {
	case links*10 >= total*6:
		// Menus, share bars, lists of other stories.
		b.junk = true
	case total < 300 && boilerplate.MatchString(cleanSpace(strings.ReplaceAll(rawText(n), spaceMark, " "))):
		b.junk = true
	case total < 400 && strings.Count(rawText(n), "|") >= 3 && total < 30*(strings.Count(rawText(n), "|")+1):
		// "Home | News | About us | Contact" written as text.
		b.junk = true
	}
	return b
}

// trimEdges removes boilerplate blocks from the start and the end of an
// answer (never from its middle, where a list of links may be the point of
// the article), and the headings left with nothing under them. It acts only
// when the boilerplate is a fair share of the answer, so a long article
// keeps its closing "further reading" list. It reports what it removed, in
// characters.
func trimEdges(n *html.Node) int {
	bs := blocksOf(n)
	total := 0
	for _, b := range bs {
		total += b.text
	}
	end := len(bs)
	for end > 0 && (bs[end-1].junk || bs[end-1].heading) {
		end--
	}
	start := 0
	for start < end && bs[start].junk {
		start++
	}
	removed := 0
	for _, b := range bs[:start] {
		removed += b.text
	}
	for _, b := range bs[end:] {
		removed += b.text
	}
	if start == end || removed*100 < total*15 {
		return 0
	}
	for _, b := range append(bs[:start:start], bs[end:]...) {
		if b.node.Parent != nil {
			b.node.Parent.RemoveChild(b.node)
		}
	}
	return removed
}

// lastResort reports trafilatura's fallback shape: nothing but paragraphs of
// bare text (no heading, link or emphasis survives it), or one long
// paragraph.
func lastResort(n *html.Node) bool {
	count := 0
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode {
			continue
		}
		if c.Data != "p" {
			return false
		}
		for t := c.FirstChild; t != nil; t = t.NextSibling {
			if t.Type != html.TextNode {
				return false
			}
		}
		count++
	}
	return count > 0
}

// covered is the share (0 to 1) of the text of part's blocks found in
// whole: 1 when the two answers agree on the article.
func covered(part []block, whole string) float64 {
	in, all := 0, 0
	for _, b := range part {
		if b.junk || b.heading || b.text < 20 {
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
		if !b.junk {
			n += b.text
		}
	}
	return n
}

package extract

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// The page is reshaped before the extractors see it, so that what a browser
// shows as one article, one paragraph or one word boundary stays one for
// trafilatura too. Every step keeps the reader-visible text as it was.

// isInline reports an element that flows inside a line of text; everything
// else (but br and comments) starts a block.
func isInline(n *html.Node) bool {
	if n.Type != html.ElementNode {
		return false
	}
	// By name: trafilatura renames elements without their atom.
	switch n.Data {
	case "a", "abbr", "b", "bdi", "bdo", "big", "cite", "code", "data", "del", "dfn", "em", "font",
		"i", "ins", "kbd", "label", "mark", "q", "s", "samp", "small", "span", "strike", "strong",
		"sub", "sup", "time", "tt", "u", "var", "img", "wbr":
		return true
	}
	return false
}

// spaceMark stands in for the whitespace at the edge of an inline element
// while trafilatura runs: trafilatura trims the text before and after every
// element inside list items (and Unicode spaces anywhere), which glues words
// ("Barrowland Glasgow" became "BarrowlandGlasgow"). A private-use character
// is not whitespace, so it survives; it becomes a plain space afterwards.
const spaceMark = "\uE000"

// markSpaces replaces with spaceMark the whitespace of every text node
// that touches an inline element, where a browser would show a word gap.
func markSpaces(n *html.Node) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		switch c.Type {
		case html.TextNode:
			markText(c)
		case html.ElementNode:
			if skipped[c.Data] || c.Data == "pre" || c.Data == "textarea" {
				continue
			}
			markSpaces(c)
		}
	}
}

func markText(t *html.Node) {
	s := t.Data
	if s == "" {
		return
	}
	before := t.PrevSibling != nil && isInline(t.PrevSibling) || t.PrevSibling == nil && t.Parent != nil && isInline(t.Parent)
	after := t.NextSibling != nil && isInline(t.NextSibling) || t.NextSibling == nil && t.Parent != nil && isInline(t.Parent)
	if !before && !after {
		return
	}
	body := strings.TrimFunc(s, unicode.IsSpace)
	if body == "" {
		t.Data = spaceMark
		return
	}
	lead, trail := s[:strings.Index(s, body)], s[strings.Index(s, body)+len(body):]
	if lead != "" && before {
		lead = spaceMark
	}
	if trail != "" && after {
		trail = spaceMark
	}
	t.Data = lead + body + trail
}

// unmarkSpaces turns every spaceMark under n back into a space.
func unmarkSpaces(n *html.Node) {
	eachText(n, func(t *html.Node) {
		if strings.Contains(t.Data, spaceMark) {
			t.Data = strings.ReplaceAll(t.Data, spaceMark, " ")
		}
	})
}

// flattenListItems removes the nesting of inline elements inside list
// items. trafilatura walks an item's descendants one by one, so an element
// whose text sits in a child element loses its place: "<li><b><a>Name</a></b>,
// role</li>" came out as ", role Name". A formatting element around a link
// gives way to the link (the link is kept, and recorded in bold so the
// emphasis can be put back); other nested formatting is unwrapped, its text
// kept.
func flattenListItems(n *html.Node, bold map[string]bool) {
	if n.Type == html.ElementNode {
		switch n.Data {
		case "li", "dt", "dd":
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				flattenInline(c, bold)
			}
		case "pre", "script", "style", "template":
			return
		}
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		flattenListItems(c, bold)
	}
}

// flattenInline leaves the inline element n (if it is one) with text
// children only.
func flattenInline(n *html.Node, bold map[string]bool) {
	if !isInline(n) {
		return
	}
	for {
		only := onlyElementChild(n)
		if only == nil || !isInline(only) {
			break
		}
		strong := n.Data == "b" || n.Data == "strong" || only.Data == "b" || only.Data == "strong"
		switch {
		case only.Data == "a" && n.Data != "a":
			// <b><a href>x</a></b>: the link takes the element's place.
			n.Data, n.DataAtom, n.Attr = only.Data, only.DataAtom, only.Attr
			unwrap(only)
		default:
			// <a><b>x</b></a>, <em><code>x</code></em>: the outer element stays.
			unwrap(only)
		}
		if strong && n.Data == "a" {
			bold[linkKey(n)] = true
		}
	}
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type == html.ElementNode && c.Data != "br" && c.Data != "img" {
			flattenInline(c, bold)
			next = c.FirstChild
			if next == nil {
				next = c.NextSibling
			}
			unwrap(c)
		}
		c = next
	}
}

// onlyElementChild is n's single element child when n has no other
// non-blank content.
func onlyElementChild(n *html.Node) *html.Node {
	var only *html.Node
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		switch c.Type {
		case html.ElementNode:
			if only != nil {
				return nil
			}
			only = c
		case html.TextNode:
			if strings.TrimFunc(c.Data, unicode.IsSpace) != "" {
				return nil
			}
		}
	}
	return only
}

// unwrap replaces n by its children.
func unwrap(n *html.Node) {
	p := n.Parent
	if p == nil {
		return
	}
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		n.RemoveChild(c)
		p.InsertBefore(c, n)
		c = next
	}
	p.RemoveChild(n)
}

// linkKey names a link by its text: trafilatura makes targets absolute.
func linkKey(a *html.Node) string {
	return cleanSpace(strings.ReplaceAll(rawText(a), spaceMark, " "))
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// emboldenLinks puts back the bold of the links in list items that
// flattenListItems recorded.
func emboldenLinks(n *html.Node, bold map[string]bool) {
	if len(bold) == 0 {
		return
	}
	if n.Type == html.ElementNode && n.Data == "a" && n.Parent != nil {
		switch n.Parent.Data {
		case "li", "dt", "dd":
		default:
			return
		}
		if bold[linkKey(n)] {
			s := &html.Node{Type: html.ElementNode, Data: "strong", DataAtom: atom.Strong}
			n.Parent.InsertBefore(s, n)
			n.Parent.RemoveChild(n)
			s.AppendChild(n)
		}
		return
	}
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling // c may move into a new <strong>
		emboldenLinks(c, bold)
		c = next
	}
}

// deadLink reports the target of a link that leads nowhere a model can
// go: none, "#", or a script.
func deadLink(href string) bool {
	href = strings.TrimSpace(href)
	if href == "" || href == "#" {
		return true
	}
	i := strings.IndexByte(href, ':')
	if i < 0 {
		return false
	}
	switch strings.ToLower(href[:i]) {
	case "javascript", "vbscript", "data":
		return true
	}
	return false
}

// dropDeadLinks unwraps links without a usable target, keeping their text:
// the Markdown converter would turn a missing target into the bare site
// root, and "#" or "javascript:" into a link that goes nowhere.
func dropDeadLinks(n *html.Node) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type == html.ElementNode {
			dropDeadLinks(c)
			if c.Data == "a" && deadLink(attr(c, "href")) {
				unwrap(c)
			}
		}
		c = next
	}
}

// paragraphs gives text written straight into a container its own
// paragraphs, as a browser lays it out: runs of text and inline elements
// between blocks become <p>, two or more <br> in a row end a paragraph, and
// a <p> holding such a double break is split. trafilatura otherwise cuts
// such text at every link or drops it, and flattens <br><br> to a line
// break. A <div> that holds nothing but prose beside other paragraphs (or
// beside other such divs) is a paragraph too, and so is a short one of the
// same class among them: trafilatura skips divs on pages with enough <p>,
// so an article written as prose divs loses whatever is left a div.
func paragraphs(n *html.Node) {
	prose := proseClasses(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode || skipped[c.Data] || c.Data == "pre" || isInline(c) {
			continue
		}
		paragraphs(c)
		switch c.Data {
		case "div", "section", "article", "main", "body", "blockquote", "center":
			switch {
			case !hasLooseText(c):
			case prose != nil && (proseDiv(c) || c.Data == "div" && !hasBlockChild(c) && prose[firstClass(c)]):
				c.Data, c.DataAtom = "p", atom.P
				splitParagraph(c)
			case hasBlockChild(c) || hasBreak(c):
				wrapRuns(c)
			}
		case "p":
			splitParagraph(c)
		}
	}
}

// proseClasses is nil unless n's children are paragraphs written as divs
// beside a <p> with text, or beside each other (two or more prose divs).
// It then holds the first class names of the prose divs ("" included), so
// that a short div of the same class, a sentence cut off by an ad, goes
// with them. An empty <p> (or one of line breaks only) shows nothing: it
// is no paragraph to stand beside.
func proseClasses(n *html.Node) map[string]bool {
	hasP, divs := false, 0
	var classes map[string]bool
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode {
			continue
		}
		switch {
		case c.Data == "p" && !hasP:
			t, _ := textSize(c)
			hasP = t > 0
		case proseDiv(c):
			divs++
			if classes == nil {
				classes = map[string]bool{}
			}
			classes[firstClass(c)] = true
		}
	}
	if !hasP && divs < 2 {
		return nil
	}
	if classes == nil {
		classes = map[string]bool{}
	}
	return classes
}

// hasLooseText reports text (not blank) written straight into n beside
// blocks or line breaks, or a div of prose only.
func hasLooseText(n *html.Node) bool {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.TextNode && strings.TrimFunc(c.Data, unicode.IsSpace) != "" {
			return true
		}
	}
	return false
}

func hasBreak(n *html.Node) bool {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && c.Data == "br" {
			return true
		}
	}
	return false
}

// proseDiv reports a div that is a paragraph in all but name (the caller
// knows it stands beside a <p>): inline content only, mostly words outside
// links.
func proseDiv(n *html.Node) bool {
	if n.Data != "div" {
		return false
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && !isInline(c) && c.Data != "br" {
			return false
		}
	}
	total, links := textSize(n)
	return total >= 80 && links*2 <= total
}

// wrapRuns moves each run of text and inline elements of n into a new <p>.
func wrapRuns(n *html.Node) {
	var run []*html.Node
	flush := func() {
		// Line breaks at either end of a paragraph show nothing.
		for len(run) > 0 && isBreakOrBlank(run[len(run)-1]) {
			run = run[:len(run)-1]
		}
		for len(run) > 0 && isBreakOrBlank(run[0]) {
			run = run[1:]
		}
		if len(run) == 0 || !hasText(run) {
			run = run[:0]
			return
		}
		p := &html.Node{Type: html.ElementNode, Data: "p", DataAtom: atom.P}
		n.InsertBefore(p, run[0])
		for _, r := range run {
			n.RemoveChild(r)
			p.AppendChild(r)
		}
		run = run[:0]
	}
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		switch {
		case c.Type == html.TextNode || isInline(c):
			run = append(run, c)
		case c.Type == html.ElementNode && c.Data == "br":
			if doubleBreak(c) {
				flush()
				for next != nil && isBreakOrBlank(next) {
					gone := next
					next = next.NextSibling
					n.RemoveChild(gone)
				}
				n.RemoveChild(c)
			} else {
				run = append(run, c)
			}
		case c.Type == html.CommentNode:
		default:
			flush()
		}
		c = next
	}
	flush()
}

// splitParagraph splits a <p> at every double line break.
func splitParagraph(p *html.Node) {
	for c := p.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode || c.Data != "br" || !doubleBreak(c) {
			continue
		}
		// Everything after the break chain goes to a new paragraph.
		rest := c.NextSibling
		for rest != nil && isBreakOrBlank(rest) {
			rest = rest.NextSibling
		}
		for c.NextSibling != rest {
			p.RemoveChild(c.NextSibling)
		}
		p.RemoveChild(c)
		if rest == nil {
			return
		}
		q := &html.Node{Type: html.ElementNode, Data: "p", DataAtom: atom.P}
		for rest != nil {
			next := rest.NextSibling
			p.RemoveChild(rest)
			q.AppendChild(rest)
			rest = next
		}
		p.Parent.InsertBefore(q, p.NextSibling)
		splitParagraph(q)
		return
	}
}

// doubleBreak reports a <br> followed, blanks aside, by another <br>.
func doubleBreak(br *html.Node) bool {
	for s := br.NextSibling; s != nil; s = s.NextSibling {
		if s.Type == html.ElementNode && s.Data == "br" {
			return true
		}
		if !isBreakOrBlank(s) {
			return false
		}
	}
	return false
}

func isBreakOrBlank(n *html.Node) bool {
	switch n.Type {
	case html.TextNode:
		return strings.TrimFunc(n.Data, unicode.IsSpace) == ""
	case html.ElementNode:
		return n.Data == "br"
	case html.CommentNode:
		return true
	}
	return false
}

func hasText(nodes []*html.Node) bool {
	for _, n := range nodes {
		if t, _ := textSize(n); t > 0 {
			return true
		}
	}
	return false
}

// textSize counts the characters of reader-visible text under n (blanks
// aside), and how many of them are inside links.
func textSize(n *html.Node) (total, links int) {
	var walk func(*html.Node, bool)
	walk = func(x *html.Node, inLink bool) {
		switch x.Type {
		case html.TextNode:
			k := 0
			for _, r := range x.Data {
				if !unicode.IsSpace(r) {
					k++
				}
			}
			total += k
			if inLink {
				links += k
			}
			return
		case html.ElementNode:
			if skipped[x.Data] {
				return
			}
			inLink = inLink || x.Data == "a"
		}
		for c := x.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inLink)
		}
	}
	walk(n, false)
	return total, links
}

// notArticle matches class names of repeated blocks that are not parts of
// one article.
var notArticle = regexp.MustCompile(`(?i)comment|related|teaser|card|promo|share|social|sidebar|widget|footer|header|nav|menu|advert|^ads?\b|banner|newsletter|subscribe|cookie|popup|modal`)

// mergeSplitBlocks joins an article split into sibling blocks: long
// features put ads, pictures and "read more" boxes between several
// <div class="article-body"> (or <section class="story-body part2">), and
// trafilatura keeps the first block it recognises. Sibling blocks of the
// same element and first class name that each hold prose are moved into
// the first of them, in order; what stood between them stays where it was.
func mergeSplitBlocks(n *html.Node) {
	type group struct {
		cls   string
		nodes []*html.Node
	}
	var groups []group
	var index map[string]int // "div article-body" -> its group
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode {
			continue
		}
		mergeSplitBlocks(c)
		switch c.Data {
		case "div", "section", "article":
		default:
			continue
		}
		cls := firstClass(c)
		if cls == "" {
			continue
		}
		key := c.Data + " " + cls
		if i, ok := index[key]; ok {
			groups[i].nodes = append(groups[i].nodes, c)
			continue
		}
		if index == nil {
			index = map[string]int{}
		}
		index[key] = len(groups)
		groups = append(groups, group{cls: cls, nodes: []*html.Node{c}})
	}
	for _, g := range groups {
		if len(g.nodes) >= 2 && !notArticle.MatchString(g.cls) {
			joinParts(n, g.nodes)
		}
	}
}

// joinParts moves the article parts among the sibling blocks of n (of one
// element and first class) into the first of them, and removes the boxes
// of other stories among them that follow it: in the post's shape, they
// would otherwise be taken for more of it. A block with stories in it and
// much prose of its own (ownArticle) is left where it is: a layout row
// that holds the story's body beside a strip of cards.
func joinParts(n *html.Node, blocks []*html.Node) {
	first := blocks[0]
	if !articlePart(first) || otherStories(first) || teaser(first) {
		return
	}
	merged := false
	for _, b := range blocks[1:] {
		switch {
		case otherStories(b):
			if ownProse(b) < ownArticle {
				n.RemoveChild(b)
			}
			continue
		case !articlePart(b) || teaser(b):
			continue
		}
		for c := b.FirstChild; c != nil; {
			next := c.NextSibling
			b.RemoveChild(c)
			first.AppendChild(c)
			c = next
		}
		n.RemoveChild(b)
		merged = true
	}
	// The blocks joined may be wrappers (a layout grid's rows, each with a
	// body block and an ad rail): their body blocks now stand side by side,
	// and are joined in turn.
	if merged {
		mergeSplitBlocks(first)
	}
}

// teaser reports a block that presents another page: its first heading is
// a link away (a story in a list, a slide of a carousel). The parts of an
// article split in blocks have headings of their own, not links; a
// heading linked to a place on the same page (href="#...") or to its
// author's profile is one.
func teaser(n *html.Node) bool {
	h := firstHeading(n)
	if h == nil {
		return false
	}
	total, links := textSize(h)
	if total == 0 || links < total {
		return false
	}
	for a := range h.Descendants() {
		if a.Type == html.ElementNode && a.Data == "a" {
			href := strings.TrimSpace(attr(a, "href"))
			return href != "" && !strings.HasPrefix(href, "#") && !profileLink.MatchString(href)
		}
	}
	return false
}

// profileLink matches links to a person's page (forums head each post with
// its author's name, linked to the author's profile): such a heading is
// a byline, and the posts of a thread are its content.
var profileLink = regexp.MustCompile(`(?i)(^|/)(members?|users?|u|profiles?|authors?)(/|\.php|$)|member(list)?\.php`)

// firstHeading is the first h1-h6 in n, in document order, or nil.
func firstHeading(n *html.Node) *html.Node {
	for c := range n.Descendants() {
		if isHeading(c) {
			return c
		}
	}
	return nil
}

// otherStories reports a block that has the shape of an article part but
// holds other stories: a "related posts" or "read more" box, which often
// shares its element and first class name with the post it follows
// (<article class="box post"> and <article class="box related">). It says
// so by a class name or id, by stories nested in it (an <article> inside an
// <article> is one), or by a heading in the words of such boxes over links.
func otherStories(n *html.Node) bool {
	for _, v := range []string{attr(n, "class"), attr(n, "id")} {
		for _, name := range strings.Fields(v) {
			if otherStoriesName.MatchString(name) {
				return true
			}
		}
	}
	stories, links := 0, 0
	var heading string
	var walk func(*html.Node)
	walk = func(x *html.Node) {
		for c := x.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode || skipped[c.Data] {
				continue
			}
			switch {
			case c.Data == "article":
				stories++
				continue
			case c.Data == "a" && attr(c, "href") != "":
				links++
			case heading == "" && isHeading(c):
				heading = strings.ToLower(cleanSpace(rawText(c)))
			}
			walk(c)
		}
	}
	walk(n)
	if stories >= 2 {
		return true
	}
	if links < 2 || heading == "" || utf8.RuneCountInString(heading) > 60 || !otherStoriesHeading(heading) {
		return false
	}
	// Teasers link their titles: a fifth of the text or more is links. A
	// section of an article headed "Related work" cites a few.
	total, linked := textSize(n)
	return linked*5 >= total
}

// otherStoriesName matches a class name or id of a box of other stories.
var otherStoriesName = regexp.MustCompile(`(?i)related|recommend|similar|more-?(stories|news|articles|posts|from)|read-?(more|also|next)|also-?like|outbrain|taboola|trending|popular|most-?read`)

// otherStoriesWords are the words (lower case) of the headings of boxes of
// other stories, in the languages toolsvc meets most.
var otherStoriesWords = []string{
	"related", "you may also like", "you might also like", "read more", "read also", "also read", "see also",
	"more from", "more stories", "more on this", "recommended", "further reading", "most read", "don't miss",
	"lesen sie auch", "auch interessant", "könnte sie auch interessieren", "mehr zum thema", "weitere artikel",
	"ähnliche artikel", "meistgelesen", "lire aussi", "vous aimerez aussi", "sur le même sujet", "articles similaires",
	"te puede interesar", "lee también", "relacionad", "leia também", "veja também", "leggi anche", "correlati",
	"читайте также", "по теме", "相关", "相關", "推荐", "推薦", "延伸阅读", "延伸閱讀", "猜你喜欢", "你可能", "更多",
	"関連記事", "あわせて読みたい", "おすすめ",
}

func otherStoriesHeading(h string) bool {
	for _, w := range otherStoriesWords {
		if strings.Contains(h, w) {
			return true
		}
	}
	return false
}

// firstClass is the first name in n's class attribute.
func firstClass(n *html.Node) string {
	cls := strings.TrimLeftFunc(attr(n, "class"), unicode.IsSpace)
	if i := strings.IndexFunc(cls, unicode.IsSpace); i >= 0 {
		cls = cls[:i]
	}
	return cls
}

// articlePart reports a block of paragraphs (not a paragraph itself) with
// at least a few sentences outside links.
func articlePart(n *html.Node) bool {
	if !hasBlockChild(n) {
		return false
	}
	total, links := textSize(n)
	return total-links >= 100 && links*3 < total
}

// ownArticle is how much prose of its own (see ownProse) makes a block
// part of the page's matter even when it also holds other stories: a
// layout row with the story's body and a strip of teasers, a chapter
// with a box of links. Boxes of other stories on the pages measured had
// at most about 400 characters of their own (a heading, a byline, a
// teaser text outside links); blocks of article 1,400 and more.
const ownArticle = 1000

// ownProse is the text of n outside links and outside the stories
// (<article> elements) nested in it.
func ownProse(n *html.Node) int {
	own := 0
	var walk func(*html.Node, bool)
	walk = func(x *html.Node, inLink bool) {
		for c := x.FirstChild; c != nil; c = c.NextSibling {
			switch {
			case c.Type == html.TextNode && !inLink:
				own += utf8.RuneCountInString(strings.TrimSpace(c.Data))
			case c.Type != html.ElementNode || skipped[c.Data] || c.Data == "article":
			default:
				walk(c, inLink || c.Data == "a")
			}
		}
	}
	walk(n, false)
	return own
}

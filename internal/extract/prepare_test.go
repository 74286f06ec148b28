package extract

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

func parseBody(t *testing.T, s string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func render(t *testing.T, n *html.Node) string {
	t.Helper()
	var b bytes.Buffer
	if err := html.Render(&b, n); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	s = strings.TrimPrefix(s, "<html><head></head><body>")
	return strings.TrimSuffix(s, "</body></html>")
}

// TestPlainTextUnicodeSpaces: a space of any kind at the edge of an inline
// element is a word gap.
func TestPlainTextUnicodeSpaces(t *testing.T) {
	for in, want := range map[string]string{
		"<p>told&nbsp;<a>Billboard</a>&nbsp;the</p>":           "told Billboard the",
		"<p>a&#8201;<em>very</em>&#8201;old</p>":               "a very old",
		"<p>B-side,&#x202F;<i>Lantern</i>&#x202F;was</p>":      "B-side, Lantern was",
		"<p>来自<a>Go</a>&#x3000;团队</p>":                         "来自Go 团队",
		"<p>x<span>&nbsp;</span><i>y</i></p>":                  "x y",
		"<ul><li><b>Barrowland</b>&nbsp;Glasgow</li></ul>":     "- Barrowland Glasgow",
		"<p>no<b>gap</b>here, 10&nbsp;km</p>":                  "nogaphere, 10 km",
		"<p>\u00a0\u00a0<b>lead</b> and trail\u00a0\u00a0</p>": "lead and trail",
	} {
		if got := tidy(PlainText(parseBody(t, in)), false); got != want {
			t.Errorf("%s: got %q, want %q", in, got, want)
		}
	}
}

// TestMarkSpaces: the whitespace touching an inline element travels as a
// mark, and comes back as one space; other whitespace is left alone.
func TestMarkSpaces(t *testing.T) {
	doc := parseBody(t, "<p>a <b>b</b>\u00a0c</p><div>\n<p>x</p>\n</div><pre> <b>k</b> </pre>")
	markSpaces(doc)
	if got, want := render(t, doc), "<p>a"+spaceMark+"<b>b</b>"+spaceMark+"c</p><div>\n<p>x</p>\n</div><pre> <b>k</b> </pre>"; got != want {
		t.Errorf("marked %q, want %q", got, want)
	}
	unmarkSpaces(doc)
	if got, want := render(t, doc), "<p>a <b>b</b> c</p><div>\n<p>x</p>\n</div><pre> <b>k</b> </pre>"; got != want {
		t.Errorf("unmarked %q, want %q", got, want)
	}
}

func TestFlattenListItems(t *testing.T) {
	bold := map[string]bool{}
	doc := parseBody(t, `<ul><li><strong><a href="/a">Ann</a></strong>, chair</li><li><a href="/b"><b>Bo</b></a> (lead)</li>`+
		`<li><a href="/c">The <em>Daily</em> Post</a> says</li><li><em><code>x</code></em> is y</li></ul><p><b><a href="/d">Di</a></b></p>`)
	flattenListItems(doc, bold)
	want := `<ul><li><a href="/a">Ann</a>, chair</li><li><a href="/b">Bo</a> (lead)</li><li><a href="/c">The Daily Post</a> says</li><li><em>x</em> is y</li></ul><p><b><a href="/d">Di</a></b></p>`
	if got := render(t, doc); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if !bold["Ann"] || !bold["Bo"] || bold["The Daily Post"] || bold["Di"] {
		t.Errorf("bold %v", bold)
	}
	emboldenLinks(doc, bold)
	if got := render(t, doc); !strings.Contains(got, `<li><strong><a href="/a">Ann</a></strong>, chair</li><li><strong><a href="/b">Bo</a></strong> (lead)</li><li><a href="/c">`) {
		t.Errorf("emboldened %s", got)
	}
}

func TestDropDeadLinks(t *testing.T) {
	doc := parseBody(t, `<p><a>none</a> <a href="">empty</a> <a href="#">hash</a> <a href=" javascript:void(0)">js</a> <a href="#notes">anchor</a> <a href="/x">x</a> <a href="mailto:a@b.example">mail</a></p>`)
	dropDeadLinks(doc)
	want := `<p>none empty hash js <a href="#notes">anchor</a> <a href="/x">x</a> <a href="mailto:a@b.example">mail</a></p>`
	if got := render(t, doc); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestParagraphs(t *testing.T) {
	prose := strings.Repeat("Prose words here. ", 6)
	for in, want := range map[string]string{
		// Bare text with links and double breaks, beside a list.
		`<div>In <a href="/p2">part 2</a> I found it.<br><br>Then <b>this</b>.<br>Same para.<ul><li>x</li></ul>Last words.</div>`: `<div><p>In <a href="/p2">part 2</a> I found it.</p><p>Then <b>this</b>.<br/>Same para.</p><ul><li>x</li></ul><p>Last words.</p></div>`,
		// A paragraph holding double breaks is split.
		`<p>one<br><br>two<br> <br>three<br>four</p>`: `<p>one</p><p>two</p><p>three<br/>four</p>`,
		// A div of prose beside paragraphs is a paragraph.
		`<p>x</p><div class="para">` + strings.Repeat("Prose words here. ", 6) + `</div>`: `<p>x</p><p class="para">` + strings.Repeat("Prose words here. ", 6) + `</p>`,
		// Short text in a div, or a div of links, is left alone; so are table cells.
		`<p>x</p><div class="info">By staff · 1 May</div><div><a href="/a">A</a> | <a href="/b">B</a></div><table><tr><td>1<br>2</td></tr></table>`: `<p>x</p><div class="info">By staff · 1 May</div><div><a href="/a">A</a> | <a href="/b">B</a></div><table><tbody><tr><td>1<br/>2</td></tr></tbody></table>`,
		// Prose divs side by side are paragraphs, with a short one of their
		// class; an empty <p> (or one of breaks) among them changes nothing.
		`<div class="a">` + prose + `</div><div class="a">Cut short</div><p><br></p><div class="a">` + prose + `</div><p> </p><div class="b">Other</div>`: `<p class="a">` + prose + `</p><p class="a">Cut short</p><p><br/></p><p class="a">` + prose + `</p><p> </p><div class="b">Other</div>`,
		// One prose div beside an empty <p> stays a div.
		`<div class="a">` + prose + `</div><p></p><div class="a">Cut short</div>`: `<div class="a">` + prose + `</div><p></p><div class="a">Cut short</div>`,
	} {
		doc := parseBody(t, in)
		paragraphs(doc)
		if got := render(t, doc); got != want {
			t.Errorf("%s:\ngot  %s\nwant %s", in, got, want)
		}
	}
}

func TestMergeSplitBlocks(t *testing.T) {
	part := func(cls, text string) string {
		return `<div class="` + cls + `"><p>` + strings.Repeat(text+" ", 30) + `</p></div>`
	}
	teaser := `<div class="item"><a href="/n">` + strings.Repeat("Another story headline ", 6) + `</a><p>short</p></div>`
	doc := parseBody(t, `<article>`+part("article-body", "One.")+`<figure>pic</figure>`+part("article-body x", "Two.")+
		`<div class="ad">ad</div>`+part("article-body", "Three.")+part("comment", "Nice.")+part("comment", "Meh.")+
		teaser+teaser+`</article>`)
	mergeSplitBlocks(doc)
	got := render(t, doc)
	one, two, three, fig := strings.Index(got, "One."), strings.Index(got, "Two."), strings.Index(got, "Three."), strings.Index(got, "<figure>")
	if strings.Count(got, `class="article-body`) != 1 || !(one < two && two < three && three < fig) {
		t.Errorf("article parts not joined in order: %s", got)
	}
	if strings.Count(got, `class="comment"`) != 2 || strings.Count(got, `class="item"`) != 2 {
		t.Errorf("comments or teasers were joined: %s", got)
	}
}

// TestMergeSplitBlocksWrappers: an article split over layout wrappers, each
// a body block beside an ad rail, becomes one body block in order, however
// deep the wrappers nest.
func TestMergeSplitBlocksWrappers(t *testing.T) {
	row := func(text string) string {
		return `<div class="grid"><div class="inner"><div class="col body"><p>` + strings.Repeat(text+" ", 30) +
			`</p></div><div class="col rail"><div class="ad"></div></div></div></div><div class="ad-row"></div>`
	}
	doc := parseBody(t, `<article>`+row("One.")+row("Two.")+row("Three.")+`</article>`)
	mergeSplitBlocks(doc)
	got := render(t, doc)
	one, two, three := strings.Index(got, "One."), strings.Index(got, "Two."), strings.Index(got, "Three.")
	if strings.Count(got, `class="col body"`) != 1 || strings.Count(got, `class="col rail"`) != 3 || !(one < two && two < three) {
		t.Errorf("body blocks not joined in order: %s", got)
	}
	body := got[strings.Index(got, `class="col body"`):]
	if body = body[:strings.Index(body, "</div>")]; !strings.Contains(body, "Three.") {
		t.Errorf("the body block does not hold every part: %s", got)
	}
}

// TestOtherStories: a box of other stories in a post's shape is told by its
// name, its nested stories or its heading over teaser links, in several
// languages; an article's own section is not.
func TestOtherStories(t *testing.T) {
	prose := strings.Repeat("Words of the article itself. ", 8)
	teasers := `<div><h3><a href="/a">A headline of another story</a></h3><p>Its teaser sentence.</p></div>` +
		`<div><h3><a href="/b">A second headline of another story</a></h3><p>Its teaser sentence.</p></div>`
	for in, want := range map[string]bool{
		`<section class="box related"><p>` + prose + `</p></section>`:                                                                 true,
		`<div class="body" id="more-stories"><p>` + prose + `</p></div>`:                                                              true,
		`<article class="box"><article><p>one</p></article><article><p>two</p></article></article>`:                                   true,
		`<section class="box"><h2>You may also like</h2>` + teasers + `</section>`:                                                    true,
		`<section class="box"><h2>Das könnte Sie auch interessieren</h2>` + teasers + `</section>`:                                    true,
		`<div class="box"><h3>相关阅读</h3><ul><li><a href="/1">另一条新闻的标题</a></li><li><a href="/2">又一条新闻的标题</a></li></ul></div>`:           true,
		`<section class="box"><h2>The harbour</h2><p>` + prose + `</p></section>`:                                                     false,
		`<section class="box"><h2>Related work</h2><p>` + prose + ` See <a href="/x">[1]</a> and <a href="/y">[2]</a>.</p></section>`: false,
		`<section class="box"><h2>Winter</h2>` + teasers + `</section>`:                                                               false,
	} {
		doc := parseBody(t, in)
		body := doc.FirstChild.LastChild // <html><head/><body>
		if got := otherStories(body.FirstChild); got != want {
			t.Errorf("%s: %v, want %v", in, got, want)
		}
	}
}

func TestTeaser(t *testing.T) {
	excerpt := `<p>` + strings.Repeat("A sentence of the teaser. ", 6) + `</p>`
	for in, want := range map[string]bool{
		`<article class="slide"><h3><a href="https://news.example/2026/story">Another story</a></h3>` + excerpt + `</article>`:          true,
		`<div class="wrap"><article><a href="/img"><img src="x.jpg"></a><h2><a href="/s">Title</a></h2>` + excerpt + `</article></div>`: true,
		`<section class="part"><h2>Winter</h2>` + excerpt + `</section>`:                                                                false,
		`<section class="part"><h2><a href="#winter">Winter</a></h2>` + excerpt + `</section>`:                                          false,
		`<section class="part"><h2>Winter, <a href="/glossary/winter">the season</a></h2>` + excerpt + `</section>`:                     false,
		`<article class="message"><h4><a href="/members/ana.123/">Ana</a></h4>` + excerpt + `</article>`:                                false,
		`<article class="post"><h4><a href="/memberlist.php?mode=viewprofile&u=7">Ana</a></h4>` + excerpt + `</article>`:                false,
		`<article class="post"><h4><a href="/u/ana">Ana</a></h4>` + excerpt + `</article>`:                                              false,
		`<div class="part">` + excerpt + `</div>`:                                                                                       false,
	} {
		doc := parseBody(t, in)
		body := doc.FirstChild.LastChild // <html><head/><body>
		if got := teaser(body.FirstChild); got != want {
			t.Errorf("%s: %v, want %v", in, got, want)
		}
	}
}

// TestTrimEdges: boilerplate goes from the edges of an answer when it is
// a good part of it (15% or more), never from its middle; a long article
// keeps its closing list of links here, since what is trimmed says how
// suspect the answer is (trimJunkEdges cleans the chosen answer).
func TestTrimEdges(t *testing.T) {
	story := "<p>" + strings.Repeat("The council voted to keep the night buses. ", 4) + "</p>"
	links := `<ul><li><a href="/1">Another story headline here</a></li><li><a href="/2">And one more story headline</a></li></ul>`
	copyright := "<p>© 2026 Metro Media. All rights reserved.</p>"
	cases := []struct {
		in, want string
		removed  bool
	}{
		{"<h1>T</h1>" + story + "<h2>More</h2>" + links + copyright, "<h1>T</h1>" + story, true},
		{links + links + story + links + story, story + links + story, true},
		{story + strings.Repeat(story, 6) + "<h2>Further reading</h2>" + links, story + strings.Repeat(story, 6) + "<h2>Further reading</h2>" + links, false},
		{links + copyright, links + copyright, false},
	}
	for _, c := range cases {
		doc := parseBody(t, c.in)
		_, removed := trimEdges(doc)
		if got := render(t, doc); got != c.want || (removed > 0) != c.removed {
			t.Errorf("%s:\ngot  %s (removed %d)\nwant %s", c.in, got, removed, c.want)
		}
	}
}

// TestTrimJunkEdges: the chosen answer loses the furniture at its edges
// however little there is, never its middle, and keeps a closing line
// that links to more and a closing lead-in.
func TestTrimJunkEdges(t *testing.T) {
	long := strings.Repeat("<p>"+strings.Repeat("The council voted to keep the night buses. ", 4)+"</p>", 7)
	links := `<ul><li><a href="/1">Another story headline here</a></li><li><a href="/2">And one more story headline</a></li></ul>`
	closing := `<p>Read the <a href="/p">full proposal on the council website</a>, or see our <a href="/m">map of the new routes</a>.</p>`
	cases := []struct{ in, want string }{
		{long + "<h2>Further reading</h2>" + links, long},
		{`<p><a href="/news">Back to the list</a></p>` + long + `<p><a href="/news">Back to the list</a></p>`, long},
		{long + "<p>- Anzeige -</p>" + "<p>Advertising disclosure: we may earn a commission from links in this story.</p>", long},
		{long + closing, long + closing},
		{long + "<p>Read the report here:</p>", long + "<p>Read the report here:</p>"},
		{long + links + long, long + links + long},
	}
	for _, c := range cases {
		doc := parseBody(t, c.in)
		trimJunkEdges(doc)
		if got := render(t, doc); got != c.want {
			t.Errorf("%s:\ngot  %s\nwant %s", c.in, got, c.want)
		}
	}
}

// TestPreferSecond: readability's answer replaces trafilatura's by quality.
func TestPreferSecond(t *testing.T) {
	story := "<p>" + strings.Repeat("The bridge closes for two weekends of repairs. ", 3) + "</p>"
	stray := "<p>Today: showers, 9°C. Tomorrow: sunny spells, 11°C and wind.</p><p>Have a story? Send tips and photos to our newsroom at any hour.</p><p>Lottery results: 4, 8, 15, 16, 23 and 42 were drawn on Saturday night.</p>"
	other := "<p>" + strings.Repeat("A completely different text about gardening in spring. ", 3) + "</p>"
	size := func(s string) int { n, _ := textSize(parseBody(t, s)); return n }
	for _, c := range []struct {
		name, first, second string
		short, want         bool
	}{
		{"same story, much less besides", story + stray, story, false, true},
		{"same story, little besides", story + "<p>Weather: rain.</p>", story, false, false},
		{"another story", story + stray, other, false, false},
		{"short first, longer second", "<p>Subscribe to read.</p>", story, true, true},
		{"short first, boilerplate second", "<p>A short brief here.</p>", "<p>© 2026 Metro. All rights reserved.</p>", true, false},
		{"flattened first", "<p>" + strings.Repeat("The bridge closes for two weekends of repairs. ", 12) + "</p>",
			strings.Repeat("<p>"+strings.Repeat("The bridge closes for two weekends of repairs. ", 3)+"</p>", 4), false, true},
	} {
		first := parseBody(t, c.first)
		if got := preferSecond(first, size(c.first), c.short, parseBody(t, c.second)); got != c.want {
			t.Errorf("%s: %v", c.name, got)
		}
	}
	if !preferSecond(nil, 0, true, parseBody(t, story)) {
		t.Error("no first answer, and the second was not taken")
	}
}

// TestMuchLonger: readability's answer wins outright when it has more
// than twice trafilatura's text, boilerplate aside.
func TestMuchLonger(t *testing.T) {
	para := "<p>" + strings.Repeat("The council approved the plan for the river banks. ", 4) + "</p>" // 204 characters
	for _, c := range []struct {
		name      string
		firstSize int
		second    string
		want      bool
	}{
		{"lead only, article found", 300, strings.Repeat(para, 4), true},
		{"not twice", 450, strings.Repeat(para, 4), false},
		{"long first, twice as long second", 1500, strings.Repeat(para, 20), true},
		{"nothing first", 0, para, true},
		{"longer only in boilerplate", 300, para + "<p>© 2026 Metro Media. All rights reserved.</p><p>Privacy policy · Terms of use · Cookie settings</p>", false},
	} {
		if got := muchLonger(c.firstSize, goodText(blocksOf(parseBody(t, c.second)))); got != c.want {
			t.Errorf("%s: %v", c.name, got)
		}
	}
}

// TestMarkdownHardBreaks: a <br> inside a paragraph stays a line break in
// Markdown (two trailing spaces), and disappears at a paragraph's end.
func TestMarkdownHardBreaks(t *testing.T) {
	body := `<html><body><article><h1>Poem</h1><p>` + strings.Repeat("The Harbour Lab publishes tide forecasts for the port every ten minutes. ", 3) +
		`</p><p>Roses are red,<br>violets are blue,<br>the tide comes in</p><p>` + strings.Repeat("The model runs sixty scenarios with different winds. ", 3) + `</p></article></body></html>`
	p, err := New(Options{}).HTML(context.Background(), []byte(body), nil, ModeMarkdown)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Text, "Roses are red,  \nviolets are blue,  \nthe tide comes in\n\n") {
		t.Errorf("%q", p.Text)
	}
	if got := tidy("a  \n\nb  \nc  ", true); got != "a\n\nb  \nc" {
		t.Errorf("tidy %q", got)
	}
}

func TestTidy(t *testing.T) {
	for _, c := range []struct {
		in       string
		markdown bool
		want     string
	}{
		{"\n \n  a  \r\n\r\n \t\n\n b\t\n c \n\n", false, "a\n\n b\n c"},
		{"x  \ny  \n\nz  ", false, "x\ny\n\nz"},
		{"x  \ny  \n\nz  ", true, "x  \ny\n\nz"},
		{"```\ncode  \n\n\n  more\n```", true, "```\ncode\n\n  more\n```"},
		{"Mit\u00adtel\u00adal\u00adter", false, "Mittelalter"},
		{"**Ge\u00adschich\u00adte**", true, "**Geschichte**"},
		{"gepru\u0308ft", false, "geprüft"},
	} {
		if got := tidy(c.in, c.markdown); got != c.want {
			t.Errorf("tidy(%q, %v) = %q, want %q", c.in, c.markdown, got, c.want)
		}
	}
}

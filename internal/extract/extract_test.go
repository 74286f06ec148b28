package extract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/extract/trafilatura"
	"golang.org/x/net/html"
)

func page(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var pageURL, _ = url.Parse("https://news.example.com/news/local/night-buses")

// TestHTML extracts every HTML test page in both modes and checks the main
// content is there and the boilerplate is not.
func TestHTML(t *testing.T) {
	e := New(Options{})
	cases := []struct {
		file    string
		ctype   string
		mode    Mode
		title   string
		want    []string
		notWant []string
	}{
		{"article.html", "text/html; charset=utf-8", ModeText, "City council approves night bus network after two-year trial",
			[]string{"voted 31 to 9", "\n\nWhat changes in March\n\n", "\n- All buses carry a second staff member after 1 a.m.\n",
				"Route | Passengers (trial) | Cost per passenger\nN1 Central – Northgate | 312,400 | $2.10",
				`curl "https://data.example-city.gov/api/v2/arrivals?route=N4&stop=1042"`},
			[]string{"Subscribe", "Advertisement", "mattresses", "cookies", "Most read", "busrider77", "Riverside Courier. All rights", "dataLayer"}},
		{"article.html", "text/html", ModeMarkdown, "",
			[]string{"## What changes in March", "\n- Routes N1 to N6 run every night of the week.\n",
				"| Route                  | Passengers (trial) | Cost per passenger |",
				"> The night network costs less than one per cent",
				"[map of the new routes](https://news.example.com/news/local/night-bus-map)"},
			[]string{"Subscribe", "Advertisement", "Most read", "<table"}},
		{"docs.html", "text/html", ModeMarkdown, "Rate limits",
			[]string{"# Rate limits", "- `X-RateLimit-Limit`: the requests allowed in the window.",
				"```\nimport random, time\nimport requests\n\ndef get_with_retry(url, key, attempts=5):\n    for _ in range(attempts):\n        r = requests.get(",
				"    raise RuntimeError(\"rate limited\")\n```", "1. Read `Retry-After`"},
			[]string{"Toggle theme", "Changelog", "On this page"}},
		{"docs.html", "text/html", ModeText, "",
			[]string{"\ndef get_with_retry(url, key, attempts=5):\n    for _ in range(attempts):\n", "Search | 60 | 10"},
			[]string{"```", "Toggle theme"}},
		{"gbk.html", "text/html", ModeText, "江南水乡古镇旅游攻略：周庄、同里与乌镇怎么玩",
			[]string{"退思园是同里最有名的园林", "\n\n第二天：同里\n\n", "- 交通：上海、苏州、杭州均有直达旅游巴士。"},
			[]string{"特价机票", "热门排行", "关于我们", "\uFFFD"}},
		{"gb2312-nometa.html", "text/html; charset=GB2312", ModeMarkdown, "",
			[]string{"## 第一天：周庄", "西栅则以夜景著称"}, []string{"\uFFFD"}},
		{"gb2312-nometa.html", "", ModeText, "", // no charset anywhere: detected
			[]string{"西栅则以夜景著称"}, []string{"\uFFFD"}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s %s %q", c.file, c.mode, c.ctype), func(t *testing.T) {
			body, _ := Decode(page(t, c.file), c.ctype, true)
			p, err := e.HTML(context.Background(), body, pageURL, c.mode)
			if err != nil {
				t.Fatal(err)
			}
			if p.Extractor != ByTrafilatura {
				t.Errorf("extractor %s", p.Extractor)
			}
			if c.title != "" && p.Title != c.title {
				t.Errorf("title %q", p.Title)
			}
			for _, w := range c.want {
				if !strings.Contains(p.Text, w) {
					t.Errorf("lacks %q in:\n%s", w, p.Text)
				}
			}
			for _, w := range c.notWant {
				if strings.Contains(p.Text, w) {
					t.Errorf("has %q in:\n%s", w, p.Text)
				}
			}
		})
	}
}

// TestHTMLNearlyEmpty: a page rendered by JavaScript has no visible text.
func TestHTMLNearlyEmpty(t *testing.T) {
	body := page(t, "spa.html")
	if n := VisibleTextLen(body); n != 0 {
		t.Errorf("visible text %d", n)
	}
	p, _ := New(Options{}).HTML(context.Background(), body, nil, ModeText)
	if len(p.Text) > 200 {
		t.Errorf("text %q", p.Text)
	}
}

// TestHTMLFallback: when trafilatura fails or finds too little, readability
// is asked, and kept when it finds more.
func TestHTMLFallback(t *testing.T) {
	for name, primary := range map[string]func(*html.Node, trafilatura.Options) (*trafilatura.ExtractResult, error){
		"trafilatura fails": func(*html.Node, trafilatura.Options) (*trafilatura.ExtractResult, error) {
			return nil, errors.New("text and comments are not long enough")
		},
		"trafilatura finds a teaser": func(*html.Node, trafilatura.Options) (*trafilatura.ExtractResult, error) {
			doc, _ := html.Parse(strings.NewReader("<p>Subscribe to read more.</p>"))
			return &trafilatura.ExtractResult{ContentNode: doc}, nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := New(Options{})
			e.primary = primary
			for _, mode := range []Mode{ModeText, ModeMarkdown} {
				p, err := e.HTML(context.Background(), page(t, "article.html"), pageURL, mode)
				if err != nil {
					t.Fatal(err)
				}
				if p.Extractor != ByReadability || !strings.Contains(p.Text, "voted 31 to 9") || strings.Contains(p.Text, "mattresses") ||
					p.Title != "City council approves night bus network after two-year trial | The Riverside Courier" {
					t.Errorf("%s: %s %q: %.300s", mode, p.Extractor, p.Title, p.Text)
				}
				if mode == ModeMarkdown && !strings.Contains(p.Text, "## What changes in March") {
					t.Errorf("markdown lost headings: %s", p.Text)
				}
			}
		})
	}

	// Content split across many short divs with link-heavy siblings: one
	// of the two extractors must still return the story.
	var b strings.Builder
	b.WriteString(`<html><head><title>Fallback</title></head><body><div id="content">`)
	for i := 0; i < 12; i++ {
		fmt.Fprintf(&b, `<div class="entry-content"><div>Sentence number %d of the story, which is long enough to count as prose for an extractor, with commas, and more words.</div></div>`, i)
	}
	b.WriteString(`</div></body></html>`)
	p, err := New(Options{}).HTML(context.Background(), []byte(b.String()), nil, ModeText)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Text, "Sentence number 11") || (p.Extractor != ByTrafilatura && p.Extractor != ByReadability) {
		t.Errorf("%s: %q", p.Extractor, p.Text)
	}
	if _, err := New(Options{}).HTML(context.Background(), []byte("<html><body></body></html>"), nil, ModeText); err == nil {
		t.Error("an empty page gave no error")
	}
}

// TestHTMLCut: past MaxChars of text the rest of the page is dropped before
// extraction (trafilatura's time grows with the square of the length).
func TestHTMLCut(t *testing.T) {
	var b strings.Builder
	b.WriteString("<html><head><title>Long</title><script>" + strings.Repeat("x", 50000) + "</script></head><body><article>")
	for i := 0; i < 400; i++ {
		fmt.Fprintf(&b, "<p>Paragraph %d. %s</p>", i, strings.Repeat("All work and no play makes a long page. ", 5))
	}
	b.WriteString("</article></body></html>")
	p, err := New(Options{MaxChars: 10000}).HTML(context.Background(), []byte(b.String()), nil, ModeText)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Cut || !strings.Contains(p.Text, "Paragraph 0.") || strings.Contains(p.Text, "Paragraph 399.") || len(p.Text) > 11000 {
		t.Errorf("cut %v, %d chars", p.Cut, len(p.Text))
	}
	p, _ = New(Options{}).HTML(context.Background(), page(t, "article.html"), nil, ModeText)
	if p.Cut {
		t.Error("a normal article was cut")
	}
}

func TestDecode(t *testing.T) {
	gbk := page(t, "gbk.html")
	cases := []struct {
		name  string
		body  []byte
		ctype string
		html  bool
		want  string
		cs    string
	}{
		{"meta gbk", gbk, "text/html", true, "江南古镇以小桥流水", "gbk"},
		{"header wins", gbk, "text/html; charset=gbk", true, "江南古镇", "gbk"},
		{"utf-8 BOM", []byte("\xef\xbb\xbfhello ü"), "text/plain", false, "hello ü", "utf-8"},
		{"utf-8 undeclared", []byte("<p>naïve café 中文</p>"), "text/html", true, "naïve café 中文", "utf-8"},
		{"latin-1 header", []byte("caf\xe9"), "text/plain; charset=iso-8859-1", false, "café", "windows-1252"},
		{"meta after 1024 bytes", append([]byte("<html><head><script>"+strings.Repeat("/* pad */", 200)+"</script><meta charset=\"gb2312\"></head><body>"), gbkBytes("中文网页")...), "text/html", true, "中文网页", "gbk"},
		{"utf-16 meta ignored", []byte(`<meta charset="utf-16"><p>ok</p>`), "text/html", true, "<p>ok</p>", "utf-8"},
		{"invalid utf-8 header", []byte("ok \xff"), "text/plain; charset=utf-8", false, "ok \uFFFD", "utf-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, cs := Decode(c.body, c.ctype, c.html)
			if !strings.Contains(string(out), c.want) || cs != c.cs {
				t.Errorf("%s: %q", cs, truncate(string(out), 200))
			}
		})
	}
}

// gbkBytes is the GBK encoding of s, taken from the GBK test page so the
// test needs no encoder.
func gbkBytes(s string) []byte {
	m := map[string][]byte{"中文网页": {0xd6, 0xd0, 0xce, 0xc4, 0xcd, 0xf8, 0xd2, 0xb3}}
	return m[s]
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func TestJSON(t *testing.T) {
	out, err := JSON(page(t, "data.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "{\n  \"status\": \"ok\",") || !strings.Contains(out, "\"eta_seconds\": 1460") {
		t.Errorf("%s", out)
	}
	if _, err := JSON([]byte(`{"cut": "of`)); err == nil {
		t.Error("invalid JSON accepted")
	}
}

func TestPlainText(t *testing.T) {
	doc, _ := html.Parse(strings.NewReader(`<h1>T</h1><p>a  <b>bold</b>
	text</p><ul><li>one</li><li>two <i>x</i></li></ul><ol><li>first</li> <li>second</li></ol><table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table><pre>  x = 1
  y = 2</pre><p>end<br>line</p><script>no()</script>`))
	want := "T\n\na bold text\n\n- one\n- two x\n\n1. first\n2. second\n\nk | v\na | 1\n\n  x = 1\n  y = 2\n\nend\nline"
	if got := tidy(PlainText(doc), false); got != want {
		t.Errorf("got:\n%q\nwant:\n%q", got, want)
	}
}

// TestJSONDeepNesting: indentation grows with depth on every line, so a
// small deeply nested document must not be pretty-printed into hundreds of
// megabytes; it comes back compact, still the same JSON.
func TestJSONDeepNesting(t *testing.T) {
	deep := strings.Repeat("[", 9000) + "1,2" + strings.Repeat("]", 9000)
	out, err := JSON([]byte(deep))
	if err != nil || out != deep {
		t.Fatalf("JSON of deep nesting: %d bytes, %v; want it compact", len(out), err)
	}
	// Ordinary documents are still indented.
	out, err = JSON([]byte(`{"a":[1,{"b":"x,y"}]}`))
	if want := "{\n  \"a\": [\n    1,\n    {\n      \"b\": \"x,y\"\n    }\n  ]\n}"; err != nil || out != want {
		t.Fatalf("JSON = %q, %v; want %q", out, err, want)
	}
	// The bound holds whatever the shape.
	for _, in := range []string{deep, strings.Repeat("[", 40) + strings.Repeat("1,", 5000) + "1" + strings.Repeat("]", 40)} {
		if est, out := indentedSize([]byte(in)), mustIndent(t, in); est < len(out) {
			t.Fatalf("indentedSize %d is below the real %d", est, len(out))
		}
	}
}

func mustIndent(t *testing.T, in string) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(in), "", "  "); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

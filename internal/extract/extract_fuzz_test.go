package extract

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

// FuzzHTML runs arbitrary bytes through what web_fetch does with a page:
// charset decoding, then extraction as text and as Markdown, and the
// visible-text count. Nothing may panic, the decoded page and the text must
// be valid UTF-8, and the text must stay in proportion to the page (no
// blow-up from nesting, entities or Markdown escaping).
func FuzzHTML(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.html")
	corpus, _ := filepath.Glob("testdata/corpus/*.html")
	files = append(files, corpus...)
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 {
			f.Add(b, "text/html")
		}
	}
	for _, s := range []string{
		"", "<p>hi</p>", "<html><head><title>t</title></head><body><article><h1>A</h1><p>text text</p></article></body></html>",
		"<ul><li><ul><li><ul><li>deep</li></ul></li></ul></li></ul>", "<table><tr><td>a<td>b</table>", "<pre><code>x := 1</code></pre>",
		"<a href='javascript:alert(1)'>x</a>", "<p>&lt;&amp;&#0;&#x110000;</p>", "<meta charset=gbk><p>\xc4\xe3\xba\xc3</p>",
		"<script>document.write('x')</script><noscript>n</noscript>", "<p>*_[]`#\\</p>", "\xff\xfe<\x00p\x00>\x00",
		"<svg><foreignObject><p>x</p></foreignObject></svg>", "<template><p>hidden</p></template>",
		`{"a":[1,2,{"b":"c\\\"]"}]}`, `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1,2,3]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
	} {
		f.Add([]byte(s), "text/html; charset=utf-8")
	}
	e := New(Options{MaxChars: 4000})
	u, _ := url.Parse("https://example.com/dir/page.html")
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		if len(body) > 256<<10 {
			return
		}
		dec, _ := Decode(body, contentType, true)
		if !utf8.Valid(dec) {
			t.Fatalf("Decode returned invalid UTF-8 for %q", body)
		}
		if n := VisibleTextLen(dec); n < 0 || n > len(dec) {
			t.Fatalf("VisibleTextLen = %d for %d bytes", n, len(dec))
		}
		limit := 8*len(dec) + 4096
		for _, mode := range []Mode{ModeText, ModeMarkdown} {
			page, err := e.HTML(context.Background(), dec, u, mode)
			if err != nil {
				continue
			}
			if !utf8.ValidString(page.Text) {
				t.Fatalf("%s: text is not valid UTF-8", mode)
			}
			if len(page.Text) > limit || len(page.Title) > len(dec)+16 {
				t.Fatalf("%s: %d bytes of text and %d of title from %d bytes of page", mode, len(page.Text), len(page.Title), len(dec))
			}
		}
		if out, err := JSON(dec); err == nil && len(out) > jsonGrowth*len(dec)+jsonSlack {
			t.Fatalf("JSON: %d bytes from %d", len(out), len(dec))
		}
	})
}

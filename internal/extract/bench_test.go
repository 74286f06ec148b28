package extract

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// benchPages are the HTML pages of testdata, with the Content-Type they
// are served with.
var benchPages = []struct{ file, ctype string }{
	{"article.html", "text/html; charset=utf-8"},
	{"docs.html", "text/html; charset=utf-8"},
	{"gbk.html", "text/html"},
	{"gb2312-nometa.html", "text/html"},
	{"spa.html", "text/html"},
}

// BenchmarkExtract measures extraction throughput over the testdata pages,
// charset decoding included, in pages per second:
//
//	go test -run '^$' -bench BenchmarkExtract -benchtime 3s ./internal/extract/
func BenchmarkExtract(b *testing.B) {
	bodies := make([][]byte, len(benchPages))
	size := 0
	for i, p := range benchPages {
		bodies[i] = page(b, p.file)
		size += len(bodies[i])
	}
	e := New(Options{})
	// The first extraction pays one-time costs (lazily compiled patterns in
	// the libraries); keep them out of whichever mode runs first.
	for i, p := range benchPages {
		body, _ := Decode(bodies[i], p.ctype, true)
		e.HTML(context.Background(), body, pageURL, ModeMarkdown)
	}
	for _, mode := range []Mode{ModeText, ModeMarkdown} {
		b.Run(string(mode), func(b *testing.B) {
			b.SetBytes(int64(size))
			pages := 0
			for b.Loop() {
				for i, p := range benchPages {
					body, _ := Decode(bodies[i], p.ctype, true)
					if _, err := e.HTML(context.Background(), body, pageURL, mode); err != nil {
						b.Fatal(p.file, err)
					}
					pages++
				}
			}
			b.ReportMetric(float64(pages)/b.Elapsed().Seconds(), "pages/s")
		})
	}
}

// BenchmarkExtractLong measures the worst case the analysis cap allows: a
// page with more text than DefaultMaxChars.
//
//	go test -run '^$' -bench BenchmarkExtractLong ./internal/extract/
func BenchmarkExtractLong(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("<html><head><title>Long</title></head><body><article>")
	for i := 0; sb.Len() < 2*DefaultMaxChars; i++ {
		fmt.Fprintf(&sb, "<p>Paragraph %d. %s</p>\n", i, strings.Repeat("All work and no play makes a long page. ", 25))
	}
	body := []byte(sb.String())
	e := New(Options{})
	for _, mode := range []Mode{ModeText, ModeMarkdown} {
		b.Run(string(mode), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if p, err := e.HTML(context.Background(), body, nil, mode); err != nil || !p.Cut {
					b.Fatal(err)
				}
			}
		})
	}
}

package extract

import (
	"context"
	"net/url"
	"strings"
	"testing"
)

// TestShortPageOnce: web_fetch of a page with one short paragraph gives
// its heading and its paragraph once each, in both modes.
func TestShortPageOnce(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:8000/tiny.html")
	page := []byte(`<!doctype html><html><head><title>Notes</title></head><body><h1>Notes</h1><p>Buy milk, then bread.</p></body></html>`)
	for _, m := range []Mode{ModeText, ModeMarkdown} {
		p, err := New(Options{}).HTML(context.Background(), page, u, m)
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if strings.Count(p.Text, "Buy milk") != 1 || strings.Contains(p.Text, "NotesNotes") {
			t.Errorf("%s: text %q, want the heading and the paragraph once each", m, p.Text)
		}
	}
}

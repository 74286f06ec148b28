package trafilatura

import (
	"testing"

	"github.com/go-shiori/dom"
)

// TestBaselineShortPage: a page whose paragraphs hold under 100
// characters is taken whole from its body, once, its pieces kept apart:
// not its paragraphs followed by the whole document run together
// ("Buy milk.NotesNotesBuy milk.", the title and the heading included).
func TestBaselineShortPage(t *testing.T) {
	doc := docFromStr(`<html><head><title>Notes</title></head><body><h1>Notes</h1><p>Buy milk, then bread.</p></body></html>`)
	body, text := baseline(doc)
	if text != "Notes Buy milk, then bread." {
		t.Errorf("baseline text %q, want %q", text, "Notes Buy milk, then bread.")
	}
	if n := len(dom.Children(body)); n != 1 {
		t.Errorf("baseline body has %d children, want the one paragraph: %s", n, dom.OuterHTML(body))
	}
}

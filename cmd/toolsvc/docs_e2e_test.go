package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/countbot/toolsvc/internal/browser"
	"github.com/countbot/toolsvc/internal/desktop/desktoptest"
)

// setBody puts read_file's arguments in the page's body editor.
const setBody = `(() => {
	const ta = document.querySelector("#operations-tools-read_file .body-param__text");
	Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, "value").set.call(ta, '{"path": "notes.txt"}');
	ta.dispatchEvent(new Event("input", {bubbles: true}));
	return true;
})()`

// pressExecute presses read_file's Execute button.
const pressExecute = `(() => {
	document.querySelector("#operations-tools-read_file button.execute").click();
	return true;
})()`

// TestDocsPageE2E opens /docs in headless Chromium against a service with
// a key, as a person does: the page loads without the key, from the
// service alone; the person gives the key, opens read_file, fills its body
// and presses Execute, and the page shows the file's text, fetched through
// the guard (the page's own origin) and the key check.
func TestDocsPageE2E(t *testing.T) {
	chrome, err := browser.FindChrome("")
	if err != nil {
		desktoptest.RequireOrSkip(t, "no Chromium: %v", err)
	}
	const key = "docs-e2e-key-0123456789"
	s := startServer(t, map[string]string{"API_KEYS": key, "TOOLS_ENABLED": "files"})
	s.Key = key
	s.writeWS(t, "notes.txt", "the docs page read this\n")

	// The page and its files need no key; the page's policy keeps it to
	// its own origin.
	resp, page := s.do(t, http.MethodGet, "/docs", nil, map[string]string{"Authorization": "", "Accept": "text/html"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") ||
		strings.Contains(string(page), "https://cdn") || strings.Contains(string(page), "<script>") {
		t.Fatalf("GET /docs: %d %s\n%s", resp.StatusCode, resp.Header, page)
	}

	// A bound, not an assertion of speed: a page that never shows the
	// result fails the test instead of hanging it.
	base := chromeContext(t, chrome)
	ctx, cancel := context.WithTimeout(base, 3*time.Minute)
	defer cancel()
	err = chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/docs#/tools/read_file"),
		chromedp.WaitVisible(chromedp.CSS(`#key`)),
		chromedp.SendKeys(chromedp.CSS(`#key`), key),
		chromedp.Click(chromedp.CSS(`#key-form button`)),
		// The key is kept for the tab: the document loads with it, and
		// deep linking opens read_file.
		chromedp.WaitVisible(chromedp.CSS(`#operations-tools-read_file`)),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`#operations-tools-read_file .body-param__text`)),
		// The body editor starts with an example built from the schema;
		// it is replaced as a paste would (React reads the input event).
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](setBody)(ctx, tg)
			return err
		}),
		// Pressed through the DOM rather than at the button's position on
		// the screen: the page is still laying itself out (the doors list
		// arrives once the key is given), and a click at coordinates taken
		// a moment earlier can land beside the button.
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](pressExecute)(ctx, tg)
			return err
		}),
		chromedp.WaitVisible(chromedp.CSS(`#operations-tools-read_file .live-responses-table .highlight-code`)),
	)
	if err != nil {
		hctx, hcancel := context.WithTimeout(base, 30*time.Second)
		defer hcancel()
		html, _ := chromedp.Run(hctx, chromedp.OuterHTML(chromedp.CSS("body")))
		t.Fatalf("the page: %v\n%.3000s\nlog:\n%s", err, html, s.Logs())
	}
	out, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#operations-tools-read_file .live-responses-table`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "the docs page read this") || !strings.Contains(out, `success`) {
		t.Errorf("the page shows %q, want read_file's result", out)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/getkin/kin-openapi/openapi3"

	"github.com/countbot/toolsvc/internal/browser"
	"github.com/countbot/toolsvc/internal/desktop/desktoptest"
)

// browserAccept is the Accept header Chromium sends when a page is opened.
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"

// TestFrontPageForBrowsersE2E: on a service with keys, a browser that opens
// / (and sends no key) gets a page that says a key is needed and links to
// /docs, and nothing of the index; API clients without a key, and anyone
// with a wrong key, still get the JSON 401; with the key, a browser gets
// the index page as before.
func TestFrontPageForBrowsersE2E(t *testing.T) {
	t.Parallel()
	const key = "front-e2e-key-0123456789abcdef"
	s := startServer(t, map[string]string{"API_KEYS": key})

	resp, page := s.do(t, http.MethodGet, "/", nil, map[string]string{"Accept": browserAccept})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET / as a browser without a key: %d %v\n%s", resp.StatusCode, resp.Header, page)
	}
	assertContains(t, "the page without a key", string(page), `<a href="/docs">/docs</a>`, "needs the key", "Authorization: Bearer &lt;key&gt;", "https://")
	for _, leak := range []string{"/tools/{name}/invoke", "/metrics", "/mcp", "/openapi.json", "<script", key} {
		if strings.Contains(string(page), leak) {
			t.Errorf("the page without a key holds %q:\n%s", leak, page)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if vary := strings.Join(resp.Header.Values("Vary"), ", "); !strings.Contains(vary, "Accept") || !strings.Contains(vary, "Authorization") {
		t.Errorf("Vary %q: a cache could give this page to a caller with a key, or the index to one without", vary)
	}
	if resp, body := s.do(t, http.MethodHead, "/", nil, map[string]string{"Accept": browserAccept}); resp.StatusCode != http.StatusOK || len(body) != 0 {
		t.Errorf("HEAD / as a browser without a key: %d %q", resp.StatusCode, body)
	}

	for _, tc := range []struct {
		name   string
		header map[string]string
	}{
		{"no Accept", nil},
		{"JSON", map[string]string{"Accept": "application/json"}},
		{"any", map[string]string{"Accept": "*/*"}},
		{"a browser with a wrong key", map[string]string{"Accept": browserAccept, "Authorization": "Bearer not-the-key-0123456789"}},
	} {
		resp, body := s.do(t, http.MethodGet, "/", nil, tc.header)
		var e struct{ Error struct{ Code string } }
		if resp.StatusCode != http.StatusUnauthorized || json.Unmarshal(body, &e) != nil || e.Error.Code != "unauthorized" ||
			resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("GET / without a valid key, %s: %d %v %s", tc.name, resp.StatusCode, resp.Header, body)
		}
	}

	s.Key = key
	resp, page = s.do(t, http.MethodGet, "/", nil, map[string]string{"Accept": browserAccept})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET / as a browser with the key: %d %s", resp.StatusCode, page)
	}
	assertContains(t, "the index page with the key", string(page), `<a href="/tools">`, "/tools/{name}/invoke", `<a href="/docs">`)
}

// TestDocsPageAsksForTheKeyE2E opens /docs in headless Chromium on a
// service with a key, as a person who has not given it yet: the page asks
// for the key and shows no error (Swagger UI's "Failed to load API
// definition" above all), which a screenshot, kept in the test's temporary
// folder, shows too. A wrong key is said to be refused; the right one
// lists the operations, and a reload keeps them. On a service without
// keys, the page shows the operations without asking.
func TestDocsPageAsksForTheKeyE2E(t *testing.T) {
	chrome, err := browser.FindChrome("")
	if err != nil {
		desktoptest.RequireOrSkip(t, "no Chromium: %v", err)
	}
	const key = "docs-ask-e2e-key-0123456789"
	s := startServer(t, map[string]string{"API_KEYS": key, "TOOLS_ENABLED": "files"})

	// A bound, not an assertion of speed: a page that never shows what it
	// should fails the test instead of hanging it.
	base := chromeContext(t, chrome)
	ctx, cancel := context.WithTimeout(base, 3*time.Minute)
	defer cancel()
	failed := func(step string, err error) {
		t.Helper()
		hctx, hcancel := context.WithTimeout(base, 30*time.Second)
		defer hcancel()
		html, _ := chromedp.Run(hctx, chromedp.OuterHTML(chromedp.CSS("body")))
		t.Fatalf("%s: %v\npage: %.4000s\nlog:\n%s", step, err, html, s.Logs())
	}
	step := func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			failed(name, err)
		}
	}
	// until waits for a JavaScript condition on the page.
	until := func(name, condition string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](condition, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			failed(name, err)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		out, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			failed("evaluating "+expr, err)
		}
		return out
	}
	const asked = `document.getElementById("need-key").textContent.includes("needs an API key")`

	step("open /docs without a key",
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(s.URL+"/docs"),
		chromedp.WaitVisible(chromedp.CSS(`#key`)),
		chromedp.WaitVisible(chromedp.CSS(`#need-key`)),
	)
	until("the page asks for the key", asked)
	// Anything Swagger UI would show after the document failed to load
	// comes right after the 401: a moment more lets it appear.
	step("settle", chromedp.Sleep(time.Second))
	text := eval(`document.body.innerText`)
	assertContains(t, "the page before the key", text, "needs an API key", "TOOLSVC_API_KEYS", "API key")
	for _, bad := range []string{"Failed to load API definition", "Fetch error", "Unauthorized", "401", "error"} {
		if strings.Contains(text, bad) {
			t.Errorf("the page before the key shows %q:\n%s", bad, text)
		}
	}
	if n := eval(`String(document.querySelectorAll("#swagger-ui *").length)`); n != "0" {
		t.Errorf("Swagger UI is drawn before the key (%s elements): it has no document to show", n)
	}
	if focused := eval(`document.activeElement ? document.activeElement.id : ""`); focused != "key" {
		t.Errorf("the focus is on %q, want the key's field", focused)
	}

	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		failed("the screenshot", err)
	}
	file := filepath.Join(t.TempDir(), "docs-before-key.png")
	if err := os.WriteFile(file, shot, 0o600); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the screenshot is no PNG: %v", err)
	}
	// Swagger UI draws its error box in #f93e3e, its red (a border, a
	// tinted background and the text): the screenshot has none of it.
	red := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 > 200 && g>>8 < 110 && bl>>8 < 110 {
				red++
			}
		}
	}
	t.Logf("screenshot of /docs before the key: %s, %dx%d, %d bytes, %d red pixels", file, b.Dx(), b.Dy(), len(shot), red)
	if b.Dx() < 1000 || b.Dy() < 800 {
		t.Errorf("the screenshot is %dx%d, want the viewport's 1280x900", b.Dx(), b.Dy())
	}
	if red > 20 {
		t.Errorf("the screenshot before the key has %d red pixels, an error box's colour: %s", red, file)
	}

	step("give a wrong key",
		chromedp.SendKeys(chromedp.CSS(`#key`), "not-the-key-0123456789"),
		chromedp.Click(chromedp.CSS(`#key-form button[type=submit]`)),
	)
	until("the page says the key was refused", `document.getElementById("need-key").textContent.includes("refused this key")`)

	step("give the key",
		chromedp.SendKeys(chromedp.CSS(`#key`), key),
		chromedp.Click(chromedp.CSS(`#key-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#operations-tools-read_file`)),
		chromedp.WaitVisible(chromedp.CSS(`#operations-service-listTools`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#need-key`)),
	)
	ops := strings.Split(eval(`Array.from(document.querySelectorAll(".opblock-summary-path")).map((e) => e.textContent.replace(/\u200b/g, "")).join("\n")`), "\n")
	sort.Strings(ops)
	assertContains(t, "the operations listed with the key", strings.Join(ops, "\n"), "/tools", "/tools/read_file/invoke", "/tools/write_file/invoke", "/healthz")
	if text := eval(`document.body.innerText`); strings.Contains(text, "Failed to load API definition") || strings.Contains(text, "refused this key") {
		t.Errorf("the page with the key still shows an error:\n%.2000s", text)
	}

	// The key is kept for the tab: a reload shows the operations at once.
	step("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#operations-tools-read_file`)))
	if shown := eval(`document.getElementById("need-key").hidden ? "hidden" : "shown"`); shown != "hidden" {
		t.Errorf("after a reload with the key kept, the page still asks for it")
	}

	// Without keys, there is nothing to ask: the operations show at once.
	open := startServer(t, map[string]string{"TOOLS_ENABLED": "files"})
	step("open /docs on a service without keys",
		chromedp.Navigate(open.URL+"/docs"),
		chromedp.WaitVisible(chromedp.CSS(`#operations-tools-read_file`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#need-key`)),
	)
}

// httpErrorCodes are the codes each error status may carry, as the one
// table of internal/http (statusOf) maps them.
var httpErrorCodes = map[string][]string{
	"400": {"bad_request"},
	"401": {"unauthorized"},
	"403": {"origin_not_allowed", "host_not_allowed", "forbidden"},
	"404": {"not_found", "unknown_tool"},
	"405": {"method_not_allowed"},
	"408": {"body_timeout"},
	"409": {"conflict"},
	"410": {"gone"},
	"413": {"body_too_large"},
	"429": {"rate_limited"},
	"500": {"internal_error"},
	"503": {"overloaded", "shutting_down", "not_ready", "unavailable"},
}

// TestErrorExamplesMatchTheirStatus: every error response of the contract
// that has a JSON body shows an example of its own, with a code its status
// carries, which /docs then shows as is; without one, Swagger UI makes one
// up from the schema, the first code of the enum ("unauthorized") for
// every status.
func TestErrorExamplesMatchTheirStatus(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromFile(filepath.Join("..", "..", "api", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status, ref := range op.Responses.Map() {
				where := method + " " + path + " " + status
				if ref.Value == nil || status[0] < '4' {
					continue
				}
				mt := ref.Value.Content.Get("application/json")
				if mt == nil || mt.Schema == nil || mt.Schema.Ref != "#/components/schemas/HTTPError" {
					continue
				}
				var examples []any
				if mt.Example != nil {
					examples = append(examples, mt.Example)
				}
				for _, ex := range mt.Examples {
					examples = append(examples, ex.Value.Value)
				}
				if len(examples) == 0 {
					t.Errorf("%s: no example", where)
				}
				for _, ex := range examples {
					checked++
					if err := mt.Schema.Value.VisitJSON(ex); err != nil {
						t.Errorf("%s: the example %v does not fit HTTPError: %v", where, ex, err)
					}
					body, _ := ex.(map[string]any)
					e, _ := body["error"].(map[string]any)
					code, _ := e["code"].(string)
					if !slices.Contains(httpErrorCodes[status], code) {
						t.Errorf("%s: the example's code is %q, which a %s does not carry (%v)", where, code, status, httpErrorCodes[status])
					}
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d examples checked: the contract's error responses were not found", checked)
	}
}

//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/countbot/toolsvc/internal/browser"
)

// pageChrome returns Chromium's path, or skips the test (fails it under
// CI) when there is none.
func pageChrome(t *testing.T) string {
	t.Helper()
	chrome, err := browser.FindChrome("")
	if err != nil {
		notTested(t, "github.com/countbot/toolsvc/cmd/toolsvc: the approvals page needs Chromium (Debian: apt-get install chromium): %v", err)
	}
	return chrome
}

// entry is the CSS selector of the page's entry for an approval.
func entry(id string) string { return `li.approval[data-approval-id="` + id + `"]` }

// pageFailed fails the test with what the page shows and the service's
// log, for a step that did not come about.
func pageFailed(t *testing.T, base context.Context, s *testServer, step string, err error) {
	t.Helper()
	hctx, cancel := context.WithTimeout(base, 30*time.Second)
	defer cancel()
	html, _ := chromedp.Run(hctx, chromedp.OuterHTML(chromedp.CSS("body")))
	t.Fatalf("%s: %v\npage: %.4000s\nlog:\n%s", step, err, html, s.Logs())
}

// TestApprovalPageE2E opens /approvals in headless Chromium as a person
// does: the page loads without a key and holds no approval; given bob's
// key, it lists alice's held calls with their summaries, approves one and
// rejects another with a reason, shows the 403 of bob deciding his own
// call, picks up a call held after it was opened without a click, and,
// given alice's key, shows why she may not decide. Through REST the
// approved call then runs and the rejected one gets the reason.
func TestApprovalPageE2E(t *testing.T) {
	chrome := pageChrome(t)
	s := startApprovals(t, nil)
	alice, bob := s.asKey(policyAliceKey), s.asKey(policyBobKey)
	approved := map[string]any{"command": "echo approved-on-the-page >> page.txt"}
	rejected := map[string]any{"command": "echo rejected-on-the-page >> page.txt"}
	h1 := held(t, alice.invoke(t, "exec", approved))
	h2 := held(t, alice.invoke(t, "exec", rejected))
	own := held(t, bob.invoke(t, "exec", map[string]any{"command": "echo bob-decides-his-own"}))

	// The page needs no key and holds nothing: no approval, no inline
	// script; its policy keeps it to its own files and out of frames.
	resp, page := s.do(t, http.MethodGet, "/approvals", nil, map[string]string{"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(csp, "script-src 'self';") || !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe") {
		t.Fatalf("GET /approvals for a browser: %d %v\n%s", resp.StatusCode, resp.Header, page)
	}
	for _, leak := range []string{h1.ApprovalID, "echo approved", "alice", "<script>", "http://", "https://"} {
		if strings.Contains(string(page), leak) {
			t.Errorf("the page without a key holds %q:\n%s", leak, page)
		}
	}
	// The list itself stays behind the key, and for alice behind the
	// approver's right.
	if resp, body := s.do(t, http.MethodGet, "/approvals", nil, map[string]string{"Accept": "application/json"}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /approvals as JSON without a key: %d %s", resp.StatusCode, body)
	}
	if resp, body := alice.do(t, http.MethodGet, "/approvals", nil, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("alice's GET /approvals: %d %s", resp.StatusCode, body)
	}
	for _, f := range []string{"approvals.js", "approvals.css"} {
		r, err := http.Get(s.URL + "/approvals/assets/" + f)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusOK || r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET /approvals/assets/%s: %d %v", f, r.StatusCode, r.Header)
		}
	}

	// A bound, not an assertion of speed: a page that never shows what it
	// should fails the test instead of hanging it.
	base := chromeContext(t, chrome)
	ctx, cancel := context.WithTimeout(base, 3*time.Minute)
	defer cancel()
	step := func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			pageFailed(t, base, s, name, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		out, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			pageFailed(t, base, s, "reading "+sel, err)
		}
		return out
	}

	step("open the page and give bob's key",
		chromedp.Navigate(s.URL+"/approvals"),
		chromedp.WaitVisible(chromedp.CSS(`#key`)),
		// Without a key the list's 401 says what to do.
		chromedp.WaitVisible(chromedp.CSS(`#error`)),
		chromedp.SendKeys(chromedp.CSS(`#key`), policyBobKey),
		chromedp.Click(chromedp.CSS(`#key-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(entry(h1.ApprovalID)+" .summary")),
		chromedp.WaitVisible(chromedp.CSS(entry(h2.ApprovalID)+" .summary")),
	)
	assertContains(t, "the first call's entry", text(entry(h1.ApprovalID)), "exec", "alice", "echo approved-on-the-page >> page.txt", h1.CallID, "Expires")
	assertContains(t, "the first call's arguments", text(entry(h1.ApprovalID)+" pre.arguments"), `"command": "echo approved-on-the-page >> page.txt"`)

	step("approve the first call",
		chromedp.Click(chromedp.CSS(entry(h1.ApprovalID)+" button.approve")),
		chromedp.WaitNotPresent(chromedp.CSS(entry(h1.ApprovalID))),
	)
	step("reject the second with a reason",
		chromedp.SendKeys(chromedp.CSS(entry(h2.ApprovalID)+" input.reason"), "not from the page today"),
		chromedp.Click(chromedp.CSS(entry(h2.ApprovalID)+" button.reject")),
		chromedp.WaitNotPresent(chromedp.CSS(entry(h2.ApprovalID))),
	)
	assertContains(t, "the decisions made on the page", text(`#decided`), "approved: exec", "rejected: exec", "reason: not from the page today")

	// bob may not decide his own call: the page shows the 403's message
	// on its entry, which stays.
	step("bob approves his own call",
		chromedp.Click(chromedp.CSS(entry(own.ApprovalID)+" button.approve")),
		chromedp.WaitVisible(chromedp.CSS(entry(own.ApprovalID)+" .outcome")),
	)
	assertContains(t, "the entry of bob's own call", text(entry(own.ApprovalID)+" .outcome"), "may not decide its own approval", "403")

	// A call held after the page was opened appears without a click, its
	// markup shown as text, never made into elements.
	const markup = `echo '<img id=injected src=x onerror="document.title=1">'`
	later := held(t, alice.invoke(t, "exec", map[string]any{"command": markup}))
	step("the list refreshes", chromedp.WaitVisible(chromedp.CSS(entry(later.ApprovalID)+" .summary")))
	assertContains(t, "the later call's entry", text(entry(later.ApprovalID)+" .summary"), `<img id=injected`)
	if injected, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("injected") !== null || document.querySelector(".approval img") !== null`)); err != nil || injected {
		t.Errorf("the page made elements of a call's arguments: %v %v", injected, err)
	}

	// alice's key may not decide: the list's 403 says so, and no entry is
	// left to press.
	step("give alice's key",
		chromedp.SendKeys(chromedp.CSS(`#key`), policyAliceKey),
		chromedp.Click(chromedp.CSS(`#key-form button[type=submit]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`li.approval`)),
		chromedp.WaitVisible(chromedp.CSS(`#error`)),
	)
	assertContains(t, "the page with alice's key", text(`#error`), "may not decide approvals", "403", "forbidden")

	// Through REST: the approved call runs, the rejected one gets the
	// person's reason, and neither ran before.
	mustSucceed(t, alice.invoke(t, "exec", approved))
	mustFail(t, alice.invoke(t, "exec", rejected), "approval_rejected", "not from the page today", "bob")
	if data, _ := os.ReadFile(filepath.Join(s.Workspace, "page.txt")); string(data) != "approved-on-the-page\n" {
		t.Errorf("page.txt = %q, want the approved call's line only", data)
	}
}

// TestApprovalPageCrossSiteE2E: another site's page, open in the same
// Chromium, can neither decide an approval (even with the approver's key
// in its hands), nor read the list, nor open the approvals page: the guard
// refuses each request before the keys are looked at, and the approval
// stays pending.
func TestApprovalPageCrossSiteE2E(t *testing.T) {
	chrome := pageChrome(t)
	s := startApprovals(t, nil)
	alice, bob := s.asKey(policyAliceKey), s.asKey(policyBobKey)
	h := held(t, alice.invoke(t, "exec", map[string]any{"command": "echo cross-site"}))

	// The other site is served on localhost, the service on 127.0.0.1:
	// two hosts, so two sites to the browser.
	attack := fmt.Sprintf(`<!doctype html><title>elsewhere</title><script>
const svc = %q, id = %q, key = %q;
window.outcome = {};
// A simple request: no preflight, so it is sent, with this page's Origin.
fetch(svc + "/approvals/" + id, {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
  body: JSON.stringify({decision: "approve", reason: "from elsewhere"})})
  .then(() => { window.outcome.post = "sent"; }, (e) => { window.outcome.post = "failed: " + e; });
// With the key: the preflight is refused, so the list is never read.
fetch(svc + "/approvals", {headers: {Authorization: "Bearer " + key}})
  .then((r) => r.text().then((b) => { window.outcome.list = "read: " + b; }), (e) => { window.outcome.list = "refused: " + e; });
</script>`, s.URL, h.ApprovalID, policyBobKey)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(attack))
	}))
	defer other.Close()
	u, _ := url.Parse(other.URL)
	elsewhere := "http://localhost:" + u.Port() + "/"

	base := chromeContext(t, chrome)
	ctx, cancel := context.WithTimeout(base, 2*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(elsewhere)); err != nil {
		pageFailed(t, base, s, "open the other site", err)
	}
	outcome, err := chromedp.Run(ctx, chromedp.Poll[map[string]string](`window.outcome && window.outcome.post && window.outcome.list ? window.outcome : null`))
	if err != nil {
		pageFailed(t, base, s, "the other site's requests", err)
	}
	if !strings.HasPrefix(outcome["list"], "refused") {
		t.Errorf("another site's page read the list with the key: %s", outcome["list"])
	}
	// The other site sends the browser to the page: a cross-site
	// navigation, refused. It is sent from a timer, so that the
	// evaluation returns before the page it runs in goes away.
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`setTimeout(() => { location.href = `+jsString(s.URL+"/approvals")+`; }, 0)`)); err != nil {
		pageFailed(t, base, s, "the other site opens the page", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if loc, err := chromedp.Run(ctx, chromedp.Location()); err == nil && strings.HasPrefix(loc, s.URL) {
			break
		}
		if time.Now().After(deadline) {
			pageFailed(t, base, s, "the other site opens the page", fmt.Errorf("still not at %s", s.URL))
		}
	}
	body, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		pageFailed(t, base, s, "reading the refusal", err)
	}
	assertContains(t, "the page opened from another site", body, "origin_not_allowed", "another site")

	// The approval was not decided, and the guard said why in the log:
	// the POST (its Origin), the list's preflight, the navigation.
	resp, data := bob.do(t, http.MethodGet, "/approvals/"+h.ApprovalID, nil, nil)
	var a struct{ Status string }
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &a) != nil || a.Status != "pending" {
		t.Errorf("the approval after the other site's attempts: %d %s", resp.StatusCode, data)
	}
	var post, preflight, navigation bool
	for _, line := range strings.Split(s.Logs(), "\n") {
		if !strings.Contains(line, "browser request refused") || !strings.Contains(line, `"code":"origin_not_allowed"`) {
			continue
		}
		fromThere := strings.Contains(line, `"origin":"http://localhost:`+u.Port()+`"`)
		switch {
		case fromThere && strings.Contains(line, `"path":"/approvals/`):
			post = true
		case fromThere && strings.Contains(line, `"path":"/approvals"`):
			preflight = true
		case strings.Contains(line, `"origin":""`) && strings.Contains(line, `"path":"/approvals"`):
			navigation = true
		}
	}
	if !post || !preflight || !navigation {
		t.Errorf("the guard's refusals on /approvals: the POST %v, the list's preflight %v, the navigation %v; log:\n%s", post, preflight, navigation, s.Logs())
	}
}

// jsString quotes s as a JavaScript string.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

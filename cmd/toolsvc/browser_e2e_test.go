package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/countbot/toolsvc/internal/browser"
	"github.com/countbot/toolsvc/internal/desktop/desktoptest"
)

// attackPage is a web page that tries every way a page can send a request
// without a CORS preflight at the service given in ?target=: a text/plain
// fetch, a text/plain form posted into a hidden frame, sendBeacon and an
// <img> GET. Each POST asks write_file for its own file. When every try
// has settled it loads /done on its own server.
const attackPage = `<!doctype html>
<html><body>
<iframe name="sink" id="sink"></iframe>
<form id="f" method="POST" enctype="text/plain" target="sink">
<input type="hidden" name='{"path":"form.txt","content":"' value='x"}'>
</form>
<script>
const target = new URLSearchParams(location.search).get("target");
const settled = [];
// 1. fetch, text/plain: a "simple" request, sent without preflight.
settled.push(fetch(target + "/tools/write_file/invoke", {method: "POST", mode: "no-cors",
	headers: {"Content-Type": "text/plain"}, body: '{"path":"fetch.txt","content":"x"}'}).catch(() => {}));
// 2. sendBeacon: a text/plain POST the page cannot even observe.
navigator.sendBeacon(target + "/tools/write_file/invoke", '{"path":"beacon.txt","content":"x"}');
// 3. a form POST into the hidden frame.
settled.push(new Promise(resolve => {
	const sink = document.getElementById("sink");
	sink.addEventListener("load", resolve, {once: true});
	const f = document.getElementById("f");
	f.action = target + "/tools/write_file/invoke";
	f.submit();
}));
// 4. an <img> GET.
settled.push(new Promise(resolve => {
	const img = new Image();
	img.onload = img.onerror = resolve;
	img.src = target + "/tools?via=img";
}));
Promise.all(settled).then(() => fetch("/done", {method: "POST"}));
</script>
</body></html>`

// TestBrowserPagesAreRefusedE2E opens a page of another origin (served on
// 127.0.0.2) in headless Chromium against a keyless service on 127.0.0.1:
// none of its requests runs a tool, and each reached the service and was
// refused. The control: the same page against a service that lists the
// page's origin in TOOLSVC_CORS_ORIGINS does write the files, so the
// browser does deliver these requests to the loopback service, and the
// refusal is the guard's doing.
func TestBrowserPagesAreRefusedE2E(t *testing.T) {
	chrome, err := browser.FindChrome("")
	if err != nil {
		desktoptest.RequireOrSkip(t, "no Chromium: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	done := make(chan string, 4)
	site := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/done" {
			done <- r.URL.RawQuery
			return
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, attackPage)
	})}}
	site.Start()
	defer site.Close()

	victim := startConfig(t, map[string]string{"TOOLS_ENABLED": "files"})
	control := startConfig(t, map[string]string{"TOOLS_ENABLED": "files", "CORS_ORIGINS": site.URL})

	ctx := chromeContext(t, chrome)
	open := func(target string) {
		t.Helper()
		select {
		case <-done:
		default:
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/?target="+target)); err != nil {
			t.Fatalf("opening the page: %v", err)
		}
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			t.Fatalf("the page did not finish its requests to %s", target)
		}
	}
	files := []string{"fetch.txt", "form.txt", "beacon.txt"}

	// The control first: the page's requests do reach a loopback service.
	open(control.URL)
	for _, f := range files {
		waitFile(t, filepath.Join(control.Workspace, f))
	}

	open(victim.URL)
	// The beacon may arrive after the page is done: wait until the
	// service has refused all four requests, then look at the workspace.
	waitLog(t, victim, `"status":403`, 4)
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(victim.Workspace, f)); err == nil {
			t.Errorf("the page wrote %s into the workspace", f)
		}
	}
	if n := strings.Count(victim.Logs(), `"path":"/tools/write_file/invoke","status":403`); n != 3 {
		t.Errorf("%d POSTs to write_file refused, want 3:\n%s", n, victim.Logs())
	}
	if !strings.Contains(victim.Logs(), `"method":"GET","path":"/tools","status":403`) {
		t.Errorf("the <img> GET was not refused:\n%s", victim.Logs())
	}
	if strings.Contains(victim.Logs(), `"status":200`) {
		t.Errorf("a request of the page was served:\n%s", victim.Logs())
	}
}

// chromeContext starts headless Chromium for the test, with a profile of
// its own and no proxy: the page talks to the loopback as a user's
// browser would.
func chromeContext(t *testing.T, chrome string) context.Context {
	t.Helper()
	home := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chrome),
		chromedp.UserDataDir(filepath.Join(home, "profile")),
		chromedp.Env("HOME="+home, "XDG_CONFIG_HOME="+home+"/.config", "XDG_CACHE_HOME="+home+"/.cache"),
		chromedp.Flag("headless", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-proxy-server", true),
	}
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(acancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// TestHostAndOriginE2E: on the loopback, a Host other than the loopback
// names is refused on every door (DNS rebinding), and so is a foreign
// Origin on /mcp; localhost:PORT and 127.0.0.1:PORT work.
func TestHostAndOriginE2E(t *testing.T) {
	s := startConfig(t, map[string]string{"TOOLS_ENABLED": "files"})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.URL, "http://"))
	send := func(method, path, body, host string, h map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		checkContract(t, req, resp, data)
		return resp.StatusCode, string(data)
	}
	mcpList := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	mcpHeaders := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	write := func(name string) string { return fmt.Sprintf(`{"path":%q,"content":"x"}`, name) }
	for _, host := range []string{"attacker.example", "attacker.example:" + port, "rebind.evil.example:" + port} {
		if code, body := send("POST", "/tools/write_file/invoke", write("host.txt"), host, nil); code != 403 || !strings.Contains(body, "host_not_allowed") {
			t.Errorf("invoke with Host %s: %d %s", host, code, body)
		}
		if code, body := send("GET", "/tools", "", host, nil); code != 403 || !strings.Contains(body, "TOOLSVC_ALLOWED_HOSTS") {
			t.Errorf("GET /tools with Host %s: %d %s", host, code, body)
		}
		if code, body := send("POST", "/mcp", mcpList, host, mcpHeaders); code != 403 || !strings.Contains(body, "host_not_allowed") {
			t.Errorf("/mcp with Host %s: %d %s", host, code, body)
		}
	}
	if _, err := os.Stat(filepath.Join(s.Workspace, "host.txt")); err == nil {
		t.Error("a request with a foreign Host wrote a file")
	}
	origin := map[string]string{"Origin": "http://evil.example"}
	for k, v := range mcpHeaders {
		origin[k] = v
	}
	if code, body := send("POST", "/mcp", mcpList, "localhost:"+port, origin); code != 403 || !strings.Contains(body, "origin_not_allowed") {
		t.Errorf("/mcp with a foreign Origin: %d %s", code, body)
	}
	for i, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "localhost"} {
		name := fmt.Sprintf("ok%d.txt", i)
		if code, body := send("POST", "/tools/write_file/invoke", write(name), host, nil); code != 200 || !strings.Contains(body, `"status":"success"`) {
			t.Errorf("invoke with Host %s: %d %s", host, code, body)
		}
		if code, body := send("POST", "/mcp", mcpList, host, mcpHeaders); code != 200 || !strings.Contains(body, "write_file") {
			t.Errorf("/mcp with Host %s: %d %.200s", host, code, body)
		}
		if _, err := os.Stat(filepath.Join(s.Workspace, name)); err != nil {
			t.Errorf("Host %s: %v", host, err)
		}
	}
	// The probes answer whatever the Host (an orchestrator's probe names
	// the pod's address), but not a foreign page.
	if code, body := send("GET", "/readyz", "", "10.244.0.7:8080", nil); code != 200 {
		t.Errorf("/readyz with the pod's address as Host: %d %s", code, body)
	}
	if code, body := send("GET", "/healthz", "", "localhost", map[string]string{"Origin": "http://evil.example"}); code != 403 {
		t.Errorf("/healthz with a foreign Origin: %d %s", code, body)
	}
}

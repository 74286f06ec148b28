package main

import (
	"bufio"
	"bytes"
	"fmt"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/countbot/toolsvc/internal/browser"
	"github.com/countbot/toolsvc/internal/desktop/desktoptest"
)

// shotRe reads the saved path and pixel size out of a screenshot result.
var shotRe = regexp.MustCompile(`saved to (\S+\.png) \((\d+)x(\d+) px, `)

// readShot checks a successful screenshot result against the PNG it names
// in the workspace and returns the decoded image's centre colour.
func readShot(t *testing.T, s *testServer, result string, w, h int) (r, g, b uint32) {
	t.Helper()
	m := shotRe.FindStringSubmatch(result)
	if m == nil {
		t.Fatalf("result names no PNG: %s", result)
	}
	if m[2] != fmt.Sprint(w) || m[3] != fmt.Sprint(h) {
		t.Errorf("result says %sx%s, want %dx%d", m[2], m[3], w, h)
	}
	data, err := os.ReadFile(filepath.Join(s.Workspace, m[1]))
	if err != nil {
		t.Fatalf("the PNG %s is not in the workspace: %v", m[1], err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", m[1], err)
	}
	if img.Bounds().Dx() != w || img.Bounds().Dy() != h {
		t.Fatalf("%s is %v, want %dx%d", m[1], img.Bounds(), w, h)
	}
	r, g, b, _ = img.At(w/2, h/2).RGBA()
	return r >> 8, g >> 8, b >> 8
}

func TestScreenshotWebE2E(t *testing.T) {
	t.Parallel()
	if _, err := browser.FindChrome(""); err != nil {
		desktoptest.RequireOrSkip(t, "no Chromium: %v", err)
	}
	// The forbidden site listens on 127.0.0.2, which the guard refuses
	// (only 127.0.0.1 is opened); it counts what reaches it.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	var hits atomic.Int32
	bad := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
	})}}
	bad.Start()
	defer bad.Close()
	forbidden := bad.URL

	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, forbidden+"/redirected", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><head><title>Green</title></head><body style="margin:0;background:#00ff00">
<img src="%s/pixel.png"><iframe src="%s/frame"></iframe>
<script>fetch("%s/api").catch(()=>{})</script></body></html>`, forbidden, forbidden, forbidden)
	}))
	defer site.Close()

	s := startServer(t, map[string]string{"NET_ALLOW_CIDRS": "127.0.0.1/32", "SCREENSHOT_MAX_PAGES": "2"})

	t.Run("page with forbidden subresources", func(t *testing.T) {
		res := s.invoke(t, "screenshot", map[string]any{"type": "web", "url": site.URL + "/", "viewport_width": 640, "viewport_height": 480})
		out := mustSucceed(t, res)
		if r, g, b := readShot(t, s, out, 640, 480); r != 0 || g != 255 || b != 0 {
			t.Errorf("centre pixel %d,%d,%d, want green", r, g, b)
		}
		for _, want := range []string{"temp/screenshots/", "Title: Green", "network policy refused", "127.0.0.2"} {
			if !strings.Contains(out, want) {
				t.Errorf("result lacks %q: %s", want, out)
			}
		}
	})
	t.Run("full page to output_path", func(t *testing.T) {
		res := s.invoke(t, "screenshot", map[string]any{"url": site.URL + "/", "output_path": "shots/full.png", "full_page": true, "viewport_width": 320, "viewport_height": 240})
		out := mustSucceed(t, res)
		if !strings.Contains(out, "saved to shots/full.png") {
			t.Errorf("not saved where asked: %s", out)
		}
	})
	t.Run("redirect to a forbidden address", func(t *testing.T) {
		mustFail(t, s.invoke(t, "screenshot", map[string]any{"url": site.URL + "/redirect"}), "policy_denied", "127.0.0.2")
	})
	t.Run("forbidden page", func(t *testing.T) {
		mustFail(t, s.invoke(t, "screenshot", map[string]any{"url": forbidden + "/"}), "policy_denied", "Next:")
	})
	t.Run("file url", func(t *testing.T) {
		mustFail(t, s.invoke(t, "screenshot", map[string]any{"type": "web", "url": "file:///etc/passwd"}), "policy_denied", "only http and https")
	})
	t.Run("output outside the workspace", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "evil.png")
		mustFail(t, s.invoke(t, "screenshot", map[string]any{"url": site.URL + "/", "output_path": target}), "path_denied", "outside the workspace")
		mustFail(t, s.invoke(t, "screenshot", map[string]any{"url": site.URL + "/", "output_path": "../evil.png"}), "path_denied")
		if _, err := os.Stat(target); err == nil {
			t.Fatal("a PNG was written outside the workspace")
		}
	})
	if n := hits.Load(); n != 0 {
		t.Fatalf("the forbidden server was reached %d times", n)
	}
}

// TestScreenshotDesktopE2E is not parallel: the service finds the X
// display in DISPLAY, which desktoptest.Xvfb sets for the whole process.
func TestScreenshotDesktopE2E(t *testing.T) {
	t.Run("no display", func(t *testing.T) {
		t.Setenv("DISPLAY", "")
		s := startServer(t, nil)
		mustFail(t, s.invoke(t, "screenshot", map[string]any{"type": "desktop"}), "unavailable", "DISPLAY", "Xvfb")
	})
	t.Run("xvfb", func(t *testing.T) {
		display := desktoptest.Xvfb(t, "1024x768x24")
		desktoptest.FillRoot(t, display, 0xff0000)
		s := startServer(t, nil)
		out := mustSucceed(t, s.invoke(t, "screenshot", map[string]any{"type": "desktop", "region": "full"}))
		if r, g, b := readShot(t, s, out, 1024, 768); r != 255 || g != 0 || b != 0 {
			t.Errorf("centre pixel %d,%d,%d, want red", r, g, b)
		}
	})
}

// countListener counts the TCP connections it accepts and closes them.
type countListener struct {
	accepts atomic.Int32
	addr    string
}

func listenCount(t *testing.T, addr string) *countListener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	c := &countListener{addr: ln.Addr().String()}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.accepts.Add(1)
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return c
}

// TestScreenshotCannotRouteAroundE2E loads, through the service, a page
// that tries to reach past the guard (WebRTC over UDP to a loopback
// listener, WebSocket, iframe, redirect and fetch to a refused address),
// then plays a command run by the exec tool with the network on that finds
// the browser's proxy and tries to use it without its secret.
func TestScreenshotCannotRouteAroundE2E(t *testing.T) {
	t.Parallel()
	if _, err := browser.FindChrome(""); err != nil {
		desktoptest.RequireOrSkip(t, "no Chromium: %v", err)
	}
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("cannot listen on udp: %v", err)
	}
	defer udp.Close()
	var packets atomic.Int32
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := udp.ReadFrom(buf); err != nil {
				return
			}
			packets.Add(1)
		}
	}()
	udpPort := udp.LocalAddr().(*net.UDPAddr).Port
	refused := listenCount(t, "127.0.0.2:0") // refused by the guard
	allowed := listenCount(t, "127.0.0.1:0") // allowed by the guard, reached only through it

	var mu sync.Mutex
	var said []string
	reported := make(chan struct{}, 4)
	// The page's WebRTC tries run in the page (where the service removes
	// RTCPeerConnection) and in a cross-site iframe (a process of its own,
	// where the browser's switch must hold); each reports what it did, and
	// the page's load waits for both reports (the /gate image).
	rtc := func(name, frame, gate string) string {
		return fmt.Sprintf(`<!doctype html><html><body style="margin:0;background:#00ff00"><script>
var log = [];
try {
  var pc = new RTCPeerConnection({iceServers: [{urls: "stun:127.0.0.1:%[1]d"}, {urls: "turn:127.0.0.1:%[1]d?transport=udp", username: "u", credential: "p"}]});
  pc.createDataChannel("x");
  pc.onicecandidate = function (e) { if (e.candidate) log.push("candidate " + e.candidate.candidate); };
  pc.createOffer().then(function (d) { return pc.setLocalDescription(d); });
  log.push("%[2]s: created");
} catch (e) { log.push("%[2]s: " + e); }
setTimeout(function () { fetch("/report", {method: "POST", body: log.join("\n")}); }, 800);
</script>%[3]s%[4]s</body></html>`, udpPort, name, frame, gate)
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/report":
			body, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
			mu.Lock()
			said = append(said, string(body))
			mu.Unlock()
			reported <- struct{}{}
			return
		case "/gate":
			for range 2 {
				select {
				case <-reported:
				case <-r.Context().Done():
					return
				}
			}
			w.WriteHeader(http.StatusNoContent)
			return
		case "/hop":
			http.Redirect(w, r, "http://"+refused.addr+"/hop", http.StatusFound)
			return
		case "/frame":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, rtc("cross-site iframe", "", ""))
			return
		}
		_, port, _ := net.SplitHostPort(r.Host)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, rtc("page", `
<iframe src="http://localhost:`+port+`/frame"></iframe>
<iframe src="http://`+refused.addr+`/frame"></iframe><iframe src="/hop"></iframe>
<script>
try { new WebSocket("ws://`+refused.addr+`/ws"); } catch (e) {}
fetch("http://`+refused.addr+`/fetch").catch(function () {});
</script>`, `<img src="/gate">`))
	}))
	defer site.Close()

	s := startServer(t, map[string]string{"NET_ALLOW_CIDRS": "127.0.0.1/32", "EXEC_NETWORK": "true"})
	out := mustSucceed(t, s.invoke(t, "screenshot", map[string]any{"url": site.URL + "/", "viewport_width": 640, "viewport_height": 480}))
	if r, g, b := readShot(t, s, out, 640, 480); r != 0 || g != 255 || b != 0 {
		t.Errorf("centre pixel %d,%d,%d, want green", r, g, b)
	}
	if !strings.Contains(out, "network policy refused") || !strings.Contains(out, "127.0.0.2") {
		t.Errorf("the result does not list the refused requests: %s", out)
	}
	mu.Lock()
	all := strings.Join(said, "\n")
	mu.Unlock()
	t.Logf("the page reported:\n%s", all)
	for _, want := range []string{"page: ReferenceError", "cross-site iframe: created"} {
		if !strings.Contains(all, want) {
			t.Errorf("the page's report lacks %q", want)
		}
	}
	if strings.Contains(all, "candidate ") {
		t.Errorf("WebRTC gathered candidates")
	}

	t.Run("a local process without the proxy's secret", func(t *testing.T) {
		// The proxy's address is no secret (it is logged; any process can
		// also list the listening ports).
		m := regexp.MustCompile(`"proxy":"(127\.0\.0\.1:\d+)"`).FindStringSubmatch(s.Logs())
		if m == nil {
			t.Fatalf("no proxy address in the logs:\n%s", s.Logs())
		}
		proxy := m[1]
		cmd := fmt.Sprintf("curl -s -o /dev/null -w 'plain=%%{http_code}\\n' -x http://%[1]s http://%[2]s/ ; "+
			"curl -s -o /dev/null -w 'tunnel=%%{http_connect}\\n' -p -x http://%[1]s http://%[2]s/ ; "+
			"curl -s -o /dev/null -w 'guessed=%%{http_code}\\n' -x http://toolsvc:secret@%[1]s http://%[2]s/", proxy, allowed.addr)
		out := mustSucceed(t, s.invoke(t, "exec", execArgs(cmd)))
		for _, want := range []string{"plain=407", "tunnel=407", "guessed=407"} {
			if !strings.Contains(out, want) {
				t.Errorf("the command's output lacks %s: %s", want, out)
			}
		}
		// From this process too, by hand, as a CONNECT.
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", allowed.addr, allowed.addr)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil || resp.StatusCode != http.StatusProxyAuthRequired {
			t.Errorf("CONNECT without the secret: %v %v, want 407", resp, err)
		}
		if n := allowed.accepts.Load(); n != 0 {
			t.Errorf("the target behind the proxy accepted %d connections", n)
		}
	})

	if n := packets.Load(); n != 0 {
		t.Errorf("the loopback UDP listener received %d packets from the page's WebRTC", n)
	}
	if n := refused.accepts.Load(); n != 0 {
		t.Errorf("the refused address accepted %d connections", n)
	}
}

package main

import (
	"bytes"
	"fmt"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

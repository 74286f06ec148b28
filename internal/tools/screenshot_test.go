package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/browser"
	"github.com/countbot/toolsvc/internal/desktop"
	"github.com/countbot/toolsvc/internal/desktop/desktoptest"
	"github.com/countbot/toolsvc/internal/netguard"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/workspace"
)

// shotEnv is a registry holding only screenshot, on a temporary workspace,
// with the guard opened for 127.0.0.1 only.
type shotEnv struct {
	reg *registry.Registry
	ws  *workspace.Workspace
	b   *browser.Browser
}

func newShotEnv(t testing.TB) *shotEnv {
	t.Helper()
	ws, err := workspace.Open(filepath.Join(t.TempDir(), "ws"), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	g, err := netguard.New(netguard.Options{AllowCIDRs: []string{"127.0.0.1/32"}})
	if err != nil {
		t.Fatal(err)
	}
	b := browser.New(browser.Options{ExecPath: os.Getenv("TOOLSVC_CHROME_PATH"), MaxPages: 2, Guard: g, Log: zerolog.Nop()})
	t.Cleanup(func() { b.Close() })
	reg := registry.New(registry.Options{Log: zerolog.Nop()})
	if err := reg.Register(NewScreenshot(ws, b, desktop.New(), ScreenshotOptions{})); err != nil {
		t.Fatal(err)
	}
	return &shotEnv{reg: reg, ws: ws, b: b}
}

func (e *shotEnv) call(t testing.TB, args any) registry.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return e.reg.Invoke(context.Background(), "screenshot", raw, registry.Meta{})
}

// savedPNG finds the path in a result, checks the file is a PNG of w x h
// and returns the path.
var savedRe = regexp.MustCompile(`saved to (\S+\.png) \((\d+)x(\d+) px, `)

func savedPNG(t testing.TB, ws *workspace.Workspace, res registry.Result, w, h int) string {
	t.Helper()
	if res.Status != registry.StatusSuccess {
		t.Fatalf("screenshot failed: %s", res.Result)
	}
	m := savedRe.FindStringSubmatch(res.Result)
	if m == nil {
		t.Fatalf("result names no saved PNG: %s", res.Result)
	}
	if want := fmt.Sprintf("%dx%d", w, h); m[2]+"x"+m[3] != want {
		t.Errorf("result says %sx%s, want %s", m[2], m[3], want)
	}
	data, err := os.ReadFile(filepath.Join(ws.Dir(), m[1]))
	if err != nil {
		t.Fatalf("the result's path %s is not in the workspace: %v", m[1], err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", m[1], err)
	}
	if img.Bounds().Dx() != w || img.Bounds().Dy() != h {
		t.Errorf("%s is %v, want %dx%d", m[1], img.Bounds(), w, h)
	}
	return m[1]
}

func needChromium(t testing.TB) {
	t.Helper()
	if _, err := browser.FindChrome(os.Getenv("TOOLSVC_CHROME_PATH")); err != nil {
		desktoptest.RequireOrSkip(t, "no Chromium: %v", err)
	}
}

func TestScreenshotArguments(t *testing.T) {
	e := newShotEnv(t)
	outside := filepath.Join(t.TempDir(), "x.png")
	tests := []struct {
		name string
		args map[string]any
		code string
		want string
	}{
		{"absolute output outside", map[string]any{"type": "web", "url": "http://127.0.0.1:1/", "output_path": outside}, toolerr.PathDenied, "outside the workspace"},
		{"dotdot output", map[string]any{"type": "web", "url": "http://127.0.0.1:1/", "output_path": "../../x.png"}, toolerr.PathDenied, "outside"},
		{"home output", map[string]any{"type": "desktop", "output_path": "~/x.png"}, toolerr.PathDenied, "~"},
		{"not png", map[string]any{"type": "web", "url": "http://127.0.0.1:1/", "output_path": "shot.jpg"}, toolerr.InvalidArguments, ".png"},
		{"web without url", map[string]any{"type": "web"}, toolerr.InvalidArguments, "needs url"},
		{"desktop with url", map[string]any{"type": "desktop", "url": "http://127.0.0.1:1/"}, toolerr.InvalidArguments, "type=web"},
		{"viewport too small", map[string]any{"type": "web", "url": "http://127.0.0.1:1/", "viewport_width": 100}, toolerr.InvalidArguments, "viewport_width"},
		{"viewport too tall", map[string]any{"type": "web", "url": "http://127.0.0.1:1/", "viewport_height": 5000}, toolerr.InvalidArguments, "viewport_height"},
		{"wait too long", map[string]any{"type": "web", "url": "http://127.0.0.1:1/", "wait_time": 60000}, toolerr.InvalidArguments, "wait_time"},
		{"timeout in milliseconds", map[string]any{"type": "web", "url": "http://127.0.0.1:1/", "timeout": 30000}, toolerr.InvalidArguments, "timeout must be <= 300"},
		{"unknown type", map[string]any{"type": "window"}, toolerr.InvalidArguments, "type"},
		{"unknown argument", map[string]any{"type": "web", "url": "http://127.0.0.1:1/", "selector": "#x"}, toolerr.InvalidArguments, "selector"},
		{"file url", map[string]any{"url": "file:///etc/passwd"}, toolerr.PolicyDenied, "only http and https"},
		{"chrome url", map[string]any{"type": "web", "url": "chrome://settings"}, toolerr.PolicyDenied, "only http and https"},
		{"metadata", map[string]any{"type": "web", "url": "http://169.254.169.254/latest/meta-data/"}, toolerr.PolicyDenied, "not a public address"},
		{"private", map[string]any{"type": "web", "url": "http://10.0.0.1/"}, toolerr.PolicyDenied, "not a public address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.call(t, tt.args)
			if res.Status != registry.StatusError || res.Error.Code != tt.code {
				t.Fatalf("want %s, got %s: %s", tt.code, res.Status, res.Result)
			}
			if !strings.Contains(res.Result, tt.want) {
				t.Errorf("result lacks %q: %s", tt.want, res.Result)
			}
		})
	}
	if _, err := os.Stat(outside); err == nil {
		t.Fatal("a file was written outside the workspace")
	}
	if e.b.Starts() != 0 {
		t.Error("refused calls started the browser")
	}
}

// TestScreenshotTimeoutSeconds: the timeout argument counts seconds, like
// exec's, and the service's bound caps it.
func TestScreenshotTimeoutSeconds(t *testing.T) {
	s := NewScreenshot(nil, nil, nil, ScreenshotOptions{Timeout: 60 * time.Second})
	for _, tc := range []struct {
		arg  int
		want time.Duration
	}{{0, 30 * time.Second}, {1, time.Second}, {45, 45 * time.Second}, {300, 60 * time.Second}} {
		if got := s.captureTimeout(tc.arg); got != tc.want {
			t.Errorf("timeout %d: %s, want %s", tc.arg, got, tc.want)
		}
	}
}

func TestScreenshotWeb(t *testing.T) {
	needChromium(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><title>Red page</title></head><body style="margin:0;background:#f00"><div style="height:1500px"></div></body></html>`)
	}))
	defer srv.Close()
	e := newShotEnv(t)

	t.Run("default path and size, unique names", func(t *testing.T) {
		res := e.call(t, map[string]any{"type": "web", "url": srv.URL, "viewport_width": 640, "viewport_height": 480})
		p := savedPNG(t, e.ws, res, 640, 480)
		if !strings.HasPrefix(p, "temp/screenshots/web-") {
			t.Errorf("default path %s is not under temp/screenshots/", p)
		}
		if !strings.Contains(res.Result, "Title: Red page") || !strings.Contains(res.Result, "HTTP status: 200") {
			t.Errorf("result lacks the title or status: %s", res.Result)
		}
		// type inferred from url; default viewport 1280x720
		if q := savedPNG(t, e.ws, e.call(t, map[string]any{"url": srv.URL}), 1280, 720); q == p {
			t.Errorf("two captures share the name %s", p)
		}
	})
	t.Run("output path and full page", func(t *testing.T) {
		res := e.call(t, map[string]any{"type": "web", "url": srv.URL, "output_path": "shots/page.png", "full_page": true, "viewport_width": 320, "viewport_height": 240})
		if p := savedPNG(t, e.ws, res, 320, 1500); p != "shots/page.png" {
			t.Errorf("saved to %s, want shots/page.png", p)
		}
	})
	t.Run("symlink out of the workspace", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "victim.png")
		if err := os.Symlink(target, filepath.Join(e.ws.Dir(), "link.png")); err != nil {
			t.Fatal(err)
		}
		res := e.call(t, map[string]any{"url": srv.URL, "output_path": "link.png", "viewport_width": 320, "viewport_height": 240})
		if res.Status != registry.StatusError || res.Error.Code != toolerr.PathDenied {
			t.Fatalf("want path_denied, got %s: %s", res.Status, res.Result)
		}
		if _, err := os.Stat(target); err == nil {
			t.Fatal("the PNG was written through the symlink outside the workspace")
		}
	})
}

func TestScreenshotDesktop(t *testing.T) {
	t.Run("no display", func(t *testing.T) {
		t.Setenv("DISPLAY", "")
		e := newShotEnv(t)
		res := e.call(t, map[string]any{"type": "desktop"})
		if res.Status != registry.StatusError || res.Error.Code != toolerr.Unavailable || !strings.Contains(res.Result, "DISPLAY") {
			t.Fatalf("want unavailable naming DISPLAY, got %s", res.Result)
		}
	})
	t.Run("xvfb", func(t *testing.T) {
		display := desktoptest.Xvfb(t, "800x600x24")
		desktoptest.FillRoot(t, display, 0x0000ff)
		e := newShotEnv(t)
		res := e.call(t, map[string]any{"type": "desktop", "region": "full"})
		p := savedPNG(t, e.ws, res, 800, 600)
		data, _ := os.ReadFile(filepath.Join(e.ws.Dir(), p))
		img, _ := png.Decode(bytes.NewReader(data))
		if r, g, b, _ := img.At(400, 300).RGBA(); r != 0 || g != 0 || b>>8 != 0xff {
			t.Errorf("centre pixel is %d,%d,%d, want blue", r>>8, g>>8, b>>8)
		}
		savedPNG(t, e.ws, e.call(t, map[string]any{"type": "desktop", "monitor": 1, "output_path": "desk.png"}), 800, 600)
		res = e.call(t, map[string]any{"type": "desktop", "monitor": 2})
		if res.Status != registry.StatusError || res.Error.Code != toolerr.InvalidArguments {
			t.Errorf("monitor 2 of 1: want invalid_arguments, got %s", res.Result)
		}
	})
}

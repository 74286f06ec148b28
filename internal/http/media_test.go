package http

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/medialink"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/workspace"
)

type mediaClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *mediaClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *mediaClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestMediaRoute serves a link with its headers, whole, in part and as
// HEAD, without a key; refuses it once expired; and keeps the token out of
// the log.
func TestMediaRoute(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "chart 1.png"), []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	clk := &mediaClock{now: time.Now()}
	links, err := medialink.New(ws, medialink.Options{PublicURL: "https://bot.example.com", Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	log := zerolog.New(zerolog.SyncWriter(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	})))
	srv := httptest.NewServer(NewHandler(Options{Registry: registry.New(registry.Options{Log: zerolog.Nop()}), Log: log, Media: links,
		Keys: []Key{{Name: "k", Secret: "key-0123456789abcdef"}}}))
	defer srv.Close()
	u, err := links.URL("", "chart 1.png")
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimPrefix(u, "https://bot.example.com")
	get := func(method string, h map[string]string) (*http.Response, string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get("GET", nil)
	if resp.StatusCode != 200 || body != "0123456789" {
		t.Fatalf("GET: %d %q", resp.StatusCode, body)
	}
	for h, want := range map[string]string{
		"Content-Type": "image/png", "X-Content-Type-Options": "nosniff", "Cache-Control": "private, no-store",
		"Content-Security-Policy": "sandbox; default-src 'none'", "Content-Disposition": "inline; filename*=UTF-8''chart%201.png",
	} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	if resp, body := get("GET", map[string]string{"Range": "bytes=2-4"}); resp.StatusCode != 206 || body != "234" {
		t.Errorf("Range: %d %q", resp.StatusCode, body)
	}
	if resp, body := get("HEAD", nil); resp.StatusCode != 200 || body != "" || resp.ContentLength != 10 {
		t.Errorf("HEAD: %d %q %d", resp.StatusCode, body, resp.ContentLength)
	}
	if resp, _ := get("POST", nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", resp.StatusCode)
	}
	clk.Advance(medialink.DefaultTTL + time.Second)
	if resp, body := get("GET", nil); resp.StatusCode != http.StatusGone || !strings.Contains(body, `"code":"gone"`) {
		t.Errorf("expired: %d %s, want 410 gone", resp.StatusCode, body)
	}
	mu.Lock()
	defer mu.Unlock()
	tok := strings.TrimPrefix(path, medialink.Route)
	if strings.Contains(logs.String(), tok[:16]) || !strings.Contains(logs.String(), `"path":"/media/[token]"`) {
		t.Errorf("the log shows the token, or not the route:\n%s", logs.String())
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

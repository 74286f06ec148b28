package medialink

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/workspace"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// setup returns links over a fresh workspace holding a.png and b.png, and
// the workspace folder.
func setup(t *testing.T, restrict bool) (*Links, *clock, string) {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{"a.png": "AAAA", "sub/b.png": "BBBBBB"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := workspace.Open(dir, restrict)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	clk := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	l, err := New(ws, Options{PublicURL: "https://bot.example.com/tools/", Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return l, clk, dir
}

func tokenOf(t *testing.T, u string) string {
	t.Helper()
	tok, ok := strings.CutPrefix(u, "https://bot.example.com/tools/media/")
	if !ok {
		t.Fatalf("link %q is not under the public URL's /media/", u)
	}
	return tok
}

func read(t *testing.T, l *Links, tok string) (string, error) {
	t.Helper()
	f, err := l.Open(tok)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), nil
}

func TestLinkServesItsFile(t *testing.T) {
	l, clk, _ := setup(t, true)
	u, err := l.URL("", "sub/b.png")
	if err != nil {
		t.Fatal(err)
	}
	tok := tokenOf(t, u)
	f, err := l.Open(tok)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "b.png" || f.Display != "sub/b.png" || f.Size != 6 {
		t.Errorf("opened %q %q %d", f.Name, f.Display, f.Size)
	}
	f.Close()
	// Until the last second of its life, and not after.
	clk.Advance(DefaultTTL)
	if got, err := read(t, l, tok); err != nil || got != "BBBBBB" {
		t.Errorf("at expiry: %q %v", got, err)
	}
	clk.Advance(time.Second)
	if _, err := read(t, l, tok); !errors.Is(err, ErrGone) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("after expiry: %v, want gone (expired)", err)
	}
}

// TestLinkAttacks tries what someone holding a link, or none, could try:
// every one is refused.
func TestLinkAttacks(t *testing.T) {
	l, _, dir := setup(t, true)
	ua, _ := l.URL("", "a.png")
	ub, _ := l.URL("", "sub/b.png")
	ta, tb := tokenOf(t, ua), tokenOf(t, ub)
	pa, ma, _ := strings.Cut(ta, ".")
	pb, mb, _ := strings.Cut(tb, ".")
	other, _ := New(l.ws, Options{PublicURL: "https://bot.example.com/tools", Now: l.now, Secret: []byte("another secret")})
	uo, _ := other.URL("", "a.png")
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	for name, tok := range map[string]string{
		"file B's payload with A's MAC": pb + "." + ma,
		"file A's payload with B's MAC": pa + "." + mb,
		"payload byte changed":          flip(pa, 3) + "." + ma,
		"MAC byte changed":              pa + "." + flip(ma, 5),
		"MAC cut":                       pa + "." + ma[:20],
		"no MAC":                        pa,
		"empty":                         "",
		"another process's secret":      tokenOf(t, uo),
		"a path":                        "..%2F..%2Fetc%2Fpasswd",
		"huge":                          strings.Repeat("A", maxToken+1) + "." + ma,
	} {
		if _, err := l.Open(tok); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: %v, want not found", name, err)
		}
	}
	// Each token opens its own file only.
	if got, _ := read(t, l, ta); got != "AAAA" {
		t.Errorf("token A read %q", got)
	}
	if got, _ := read(t, l, tb); got != "BBBBBB" {
		t.Errorf("token B read %q", got)
	}
	// A file changed or replaced after signing is not served.
	if err := os.WriteFile(filepath.Join(dir, "a.png"), []byte("EVIL"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(dir, "a.png"), time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Open(ta); !errors.Is(err, ErrGone) {
		t.Errorf("changed file: %v, want gone", err)
	}
	if err := os.Remove(filepath.Join(dir, "sub/b.png")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Open(tb); !errors.Is(err, ErrGone) {
		t.Errorf("removed file: %v, want gone", err)
	}
}

// TestNoLinkOutsideWorkspace: no path outside the workspace gets a link,
// restricted or not, through "..", an absolute path or a symbolic link,
// and neither does a folder.
func TestNoLinkOutsideWorkspace(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.png")
	if err := os.WriteFile(outside, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, restrict := range []bool{true, false} {
		l, _, dir := setup(t, restrict)
		if err := os.Symlink(outside, filepath.Join(dir, "link.png")); err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, outside)
		for _, p := range []string{outside, rel, "link.png", "sub", "."} {
			if u, err := l.URL("", p); err == nil {
				t.Errorf("restrict=%v: %q got a link %s", restrict, p, u)
			}
		}
	}
}

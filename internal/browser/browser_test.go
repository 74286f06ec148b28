package browser

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/netguard"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// The tests run real pages in real Chromium. Every address is on loopback:
// the allowed site listens on 127.0.0.1 and the forbidden one on 127.0.0.2,
// which the guard refuses (only 127.0.0.1/32 and the name allowed.test are
// opened). The forbidden server counts what reaches it; it must stay zero.

// needChrome skips the test without Chromium, or fails it under CI.
func needChrome(t testing.TB) {
	t.Helper()
	if _, err := FindChrome(os.Getenv("TOOLSVC_CHROME_PATH")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Chromium is required under CI: %v", err)
		}
		t.Skipf("no Chromium: %v", err)
	}
}

// stubResolver answers from a map, so no DNS query leaves the machine.
type stubResolver map[string]string

func (r stubResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	if ip, ok := r[strings.ToLower(host)]; ok {
		return []net.IPAddr{{IP: net.ParseIP(ip)}}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func testGuard(t testing.TB) *netguard.Guard {
	t.Helper()
	g, err := netguard.New(netguard.Options{
		AllowCIDRs: []string{"127.0.0.1/32"},
		AllowHosts: []string{"allowed.test"},
		Resolver: stubResolver{
			"allowed.test": "127.0.0.1",
			"evil.test":    "127.0.0.2", // a name that resolves to a forbidden address
			"localhost":    "127.0.0.2",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// forbidden is a server on 127.0.0.2 that must never be reached.
type forbidden struct {
	*httptest.Server
	hits atomic.Int64
	port string
}

func newForbidden(t testing.TB) *forbidden {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	f := &forbidden{}
	f.Server = &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		fmt.Fprint(w, "<body style='background:#000'>secret</body>")
	})}}
	f.Start()
	t.Cleanup(f.Close)
	_, f.port, _ = net.SplitHostPort(ln.Addr().String())
	return f
}

// site is the allowed server on 127.0.0.1 with the test pages.
// siteGates hold pages back: /hang.png until slow closes, /held until held
// closes (and /held reports its arrival on arrived).
type siteGates struct {
	slow, held, arrived chan struct{}
}

func newGates() siteGates {
	return siteGates{make(chan struct{}), make(chan struct{}), make(chan struct{}, 8)}
}

func newSite(t testing.TB, bad *forbidden, g siteGates) (*httptest.Server, string) {
	t.Helper()
	mux := http.NewServeMux()
	page := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, "<!doctype html><html><head><meta charset=utf-8><style>html,body{margin:0;padding:0}</style></head>"+body+"</html>")
		}
	}
	bp := bad.port
	mux.Handle("/red", page(`<body style="background:#ff0000"></body>`))
	mux.Handle("/tall", page(`<body style="background:#0000ff"><div style="height:2500px;background:#00ff00"></div></body>`))
	mux.Handle("/attack", page(`<body style="background:#ff0000">
<img src="http://127.0.0.2:`+bp+`/img-literal">
<img src="http://evil.test:`+bp+`/img-name">
<img src="http://localhost:`+bp+`/img-localhost">
<img src="http://2130706434:`+bp+`/img-decimal">
<link rel="stylesheet" href="https://evil.test:`+bp+`/css-tls">
<iframe src="http://evil.test:`+bp+`/iframe-name"></iframe>
<iframe src="http://127.0.0.2:`+bp+`/iframe-literal"></iframe>
<iframe src="file:///etc/passwd"></iframe>
<script>
fetch("http://127.0.0.2:`+bp+`/fetch").catch(()=>{});
fetch("http://evil.test:`+bp+`/fetch-name", {mode: "no-cors"}).catch(()=>{});
var x = new XMLHttpRequest(); x.open("GET", "http://evil.test:`+bp+`/xhr"); x.send();
try { new WebSocket("ws://evil.test:`+bp+`/ws"); } catch (e) {}
try { new WebSocket("ws://127.0.0.2:`+bp+`/ws-literal"); } catch (e) {}
navigator.sendBeacon("http://evil.test:`+bp+`/beacon", "x");
new Worker(URL.createObjectURL(new Blob(['fetch("http://evil.test:`+bp+`/worker").catch(()=>{})'])));
</script></body>`))
	mux.Handle("/jsnav", page(`<body style="background:#ff0000"><script>location.href="http://evil.test:`+bp+`/nav";</script></body>`))
	mux.Handle("/jsnav-file", page(`<body style="background:#ff0000"><script>location.href="file:///etc/passwd";</script></body>`))
	mux.HandleFunc("/redirect-name", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://evil.test:"+bp+"/redirected", http.StatusFound)
	})
	mux.HandleFunc("/redirect-literal", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.2:"+bp+"/redirected", http.StatusFound)
	})
	mux.HandleFunc("/hang.png", func(w http.ResponseWriter, r *http.Request) {
		select { // never answers until the test ends or the browser gives up
		case <-g.slow:
		case <-r.Context().Done():
		}
	})
	mux.Handle("/stuck", page(`<body style="background:#ff0000"><img src="/hang.png"></body>`))
	mux.HandleFunc("/held", func(w http.ResponseWriter, r *http.Request) {
		g.arrived <- struct{}{}
		select {
		case <-g.held:
		case <-r.Context().Done():
		}
		page(`<body style="background:#ff0000"></body>`)(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return srv, port
}

func newBrowser(t testing.TB, maxPages int) *Browser {
	t.Helper()
	b := New(Options{ExecPath: os.Getenv("TOOLSVC_CHROME_PATH"), MaxPages: maxPages, Guard: testGuard(t), Log: zerolog.Nop()})
	t.Cleanup(func() { b.Close() })
	return b
}

func callCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func decode(t testing.TB, data []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	return img
}

func wantColour(t testing.TB, img image.Image, x, y int, want color.RGBA) {
	t.Helper()
	r, g, b, _ := img.At(x, y).RGBA()
	got := color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 255}
	if got != want {
		t.Errorf("pixel (%d,%d) = %v, want %v", x, y, got, want)
	}
}

var (
	red   = color.RGBA{255, 0, 0, 255}
	green = color.RGBA{0, 255, 0, 255}
)

func TestCapture(t *testing.T) {
	needChrome(t)
	bad := newForbidden(t)
	gates := newGates()
	defer close(gates.slow)
	_, port := newSite(t, bad, gates)
	site := "http://127.0.0.1:" + port
	// One page at a time: the subtests run in turn, and "one page at a
	// time" tests the bound.
	b := newBrowser(t, 1)

	t.Run("one colour", func(t *testing.T) {
		shot, err := b.Capture(callCtx(t, 60*time.Second), Request{URL: site + "/red", Width: 400, Height: 300})
		if err != nil {
			t.Fatal(err)
		}
		img := decode(t, shot.PNG)
		if shot.Width != 400 || shot.Height != 300 || img.Bounds().Dx() != 400 || img.Bounds().Dy() != 300 {
			t.Fatalf("size %dx%d (image %v), want 400x300", shot.Width, shot.Height, img.Bounds())
		}
		for _, p := range []image.Point{{0, 0}, {200, 150}, {399, 299}} {
			wantColour(t, img, p.X, p.Y, red)
		}
		if shot.Status != 200 || !strings.HasSuffix(shot.FinalURL, "/red") {
			t.Errorf("status %d, final URL %q", shot.Status, shot.FinalURL)
		}
	})

	t.Run("full page", func(t *testing.T) {
		shot, err := b.Capture(callCtx(t, 60*time.Second), Request{URL: site + "/tall", Width: 400, Height: 300, FullPage: true})
		if err != nil {
			t.Fatal(err)
		}
		img := decode(t, shot.PNG)
		if img.Bounds().Dx() != 400 || img.Bounds().Dy() != 2500 {
			t.Fatalf("full page is %v, want 400x2500", img.Bounds())
		}
		wantColour(t, img, 200, 2400, green) // far below the 300 px viewport
	})

	t.Run("browser reused", func(t *testing.T) {
		if n := b.Starts(); n != 1 {
			t.Errorf("browser started %d times for several calls, want 1", n)
		}
	})

	t.Run("subresources iframes fetch websocket worker", func(t *testing.T) {
		shot, err := b.Capture(callCtx(t, 60*time.Second), Request{URL: site + "/attack", Width: 400, Height: 300, Wait: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		wantColour(t, decode(t, shot.PNG), 399, 299, red)
		if shot.NBlocked == 0 || len(shot.Blocked) == 0 {
			t.Errorf("no blocked request reported")
		}
		joined := strings.Join(shot.Blocked, "\n")
		for _, want := range []string{"img-literal", "iframe-literal", "img-name", "css-tls"} {
			if !strings.Contains(joined, want) {
				t.Errorf("blocked list lacks %s:\n%s", want, joined)
			}
		}
	})

	for _, tc := range []struct{ name, path string }{
		{"js navigation by name", "/jsnav"},
		{"js navigation to file", "/jsnav-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.Capture(callCtx(t, 60*time.Second), Request{URL: site + tc.path, Width: 320, Height: 240, Wait: 300 * time.Millisecond})
			if err != nil && toolerr.ErrorCode(err) != toolerr.PolicyDenied {
				t.Errorf("want success or policy_denied, got %v", err)
			}
		})
	}

	for _, tc := range []struct{ name, url, code string }{
		{"redirect to a name", site + "/redirect-name", toolerr.PolicyDenied},
		{"redirect to an address", site + "/redirect-literal", toolerr.PolicyDenied},
		{"page by address", "http://127.0.0.2:" + bad.port + "/", toolerr.PolicyDenied},
		{"page by name", "http://evil.test:" + bad.port + "/", toolerr.PolicyDenied},
		{"page by decimal address", "http://2130706434:" + bad.port + "/", toolerr.PolicyDenied},
		{"https page by name", "https://evil.test:" + bad.port + "/", toolerr.PolicyDenied},
		{"metadata", "http://169.254.169.254/latest/meta-data/", toolerr.PolicyDenied},
		{"file", "file:///etc/passwd", toolerr.PolicyDenied},
		{"chrome", "chrome://version", toolerr.PolicyDenied},
		{"data", "data:text/html,<h1>x</h1>", toolerr.PolicyDenied},
		{"javascript", "javascript:alert(1)", toolerr.PolicyDenied},
		{"about", "about:blank", toolerr.PolicyDenied},
		{"view-source", "view-source:" + site + "/red", toolerr.PolicyDenied},
		{"no scheme", "example.com", toolerr.InvalidArguments},
		{"credentials", "http://user:pw@127.0.0.1:" + port + "/red", toolerr.InvalidArguments},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.Capture(callCtx(t, 60*time.Second), Request{URL: tc.url, Width: 320, Height: 240})
			if got := toolerr.ErrorCode(err); got != tc.code {
				t.Fatalf("want %s, got %q: %v", tc.code, got, err)
			}
			if !strings.Contains(err.Error(), "Next:") {
				t.Errorf("message gives no next step: %v", err)
			}
		})
	}

	t.Run("page that never finishes loading", func(t *testing.T) {
		shot, err := b.Capture(callCtx(t, 6*time.Second), Request{URL: site + "/stuck", Width: 320, Height: 240})
		if err != nil {
			t.Fatal(err)
		}
		wantColour(t, decode(t, shot.PNG), 300, 200, red)
		if len(shot.Notes) == 0 || !strings.Contains(shot.Notes[0], "still loading") {
			t.Errorf("notes %q do not say the page was still loading", shot.Notes)
		}
	})

	t.Run("one page at a time", func(t *testing.T) {
		// The first call holds the only page: its document is held back by the
		// server until the test lets it go.
		first := make(chan error, 1)
		go func() {
			_, err := b.Capture(callCtx(t, 60*time.Second), Request{URL: site + "/held", Width: 320, Height: 240})
			first <- err
		}()
		<-gates.arrived // the first call holds the page now
		_, err := b.Capture(callCtx(t, 500*time.Millisecond), Request{URL: site + "/red", Width: 320, Height: 240})
		if toolerr.ErrorCode(err) != toolerr.Busy {
			t.Errorf("second call while the only page is held: want busy, got %v", err)
		}
		close(gates.held)
		if err := <-first; err != nil {
			t.Fatalf("first call: %v", err)
		}

		// Several calls queue for the one page and all succeed.
		var wg sync.WaitGroup
		errs := make(chan error, 3)
		for range 3 {
			wg.Go(func() {
				_, err := b.Capture(callCtx(t, 60*time.Second), Request{URL: site + "/red", Width: 320, Height: 240})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("restart after a crash", func(t *testing.T) {
		if err := b.kill(); err != nil {
			t.Fatal(err)
		}
		if b.Running() {
			t.Fatal("browser still counted as running after it died")
		}
		shot, err := b.Capture(callCtx(t, 60*time.Second), Request{URL: site + "/red", Width: 320, Height: 240})
		if err != nil {
			t.Fatal(err)
		}
		wantColour(t, decode(t, shot.PNG), 10, 10, red)
		if n := b.Starts(); n != 2 {
			t.Errorf("starts = %d after one crash, want 2", n)
		}
	})

	t.Run("no process left after close", func(t *testing.T) {
		b.mu.Lock()
		home := b.home
		b.mu.Unlock()
		if home == "" {
			t.Fatal("no browser running")
		}
		b.Close()
		if left := processesUsing(home + "/"); len(left) > 0 {
			t.Errorf("processes outlive the browser: %v", left)
		}
		if _, err := os.Stat(home); err == nil {
			t.Errorf("the browser's home %s is left behind", home)
		}
	})

	if n := bad.hits.Load(); n != 0 {
		t.Fatalf("the forbidden server on 127.0.0.2 was reached %d times", n)
	}
}

// processesUsing lists the live processes whose command line holds s.
func processesUsing(s string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmd, []byte(s)) {
			continue
		}
		if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && bytes.Contains(st, []byte(") Z ")) {
			continue // a zombie: already dead, waiting for its parent
		}
		out = append(out, e.Name()+": "+string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
	}
	return out
}

func TestNoChromium(t *testing.T) {
	for _, tc := range []struct{ path, env, want string }{
		{"/nonexistent/chromium", os.Getenv("PATH"), "TOOLSVC_CHROME_PATH"},
		{"", t.TempDir(), "install Chromium"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			t.Setenv("PATH", tc.env)
			b := New(Options{ExecPath: tc.path, Guard: testGuard(t), Log: zerolog.Nop()})
			defer b.Close()
			_, err := b.Capture(callCtx(t, 10*time.Second), Request{URL: "http://127.0.0.1:1/", Width: 320, Height: 240})
			if toolerr.ErrorCode(err) != toolerr.Unavailable || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want unavailable naming %q, got %v", tc.want, err)
			}
		})
	}
}

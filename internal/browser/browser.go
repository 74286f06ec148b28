// Package browser runs one headless Chromium for the screenshot tool: it
// starts the browser on first use, reuses it for every call, bounds the
// pages open at once, and starts it again when it has died. Every
// connection the browser makes goes through a proxy inside the service that
// dials only through the network guard.
package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/rs/zerolog"
)

// errorf returns a *toolerr.Error with code, the underlying error err (may
// be nil) and a message for the model.
func errorf(code string, err error, format string, args ...any) error {
	return &toolerr.Error{Code: code, Err: err, Message: fmt.Sprintf(format, args...)}
}

// Defaults for Options left at zero.
const (
	DefaultMaxPages     = 4
	DefaultStartTimeout = 30 * time.Second
)

// ChromeNames are the programs looked up on PATH when no path is configured.
var chromeNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless_shell"}

// Options configure a Browser.
type Options struct {
	ExecPath     string        // Chromium or Chrome binary; empty: the first of chromium, chromium-browser, google-chrome... on PATH
	MaxPages     int           // pages (tabs) open at once; more callers wait
	StartTimeout time.Duration // how long a browser start may take
	Guard        Guard         // every connection of the browser goes through it
	Log          zerolog.Logger
}

// Browser is a lazily started, shared headless Chromium. It is safe for
// concurrent use.
type Browser struct {
	opts Options
	sem  chan struct{}

	mu      sync.Mutex
	closed  bool
	proxy   *Proxy
	ctx     context.Context // root chromedp context of the running browser; nil when none
	cancel  context.CancelFunc
	alloc   context.CancelFunc
	home    string
	starts  int
	lastOut *tailBuffer

	// spare is a blank tab opened ahead of the next call, in a browser
	// context of its own, so a call does not wait for a renderer to start.
	spare      chan tab
	prewarming atomic.Bool
}

// tab is an open page: its chromedp context and the func that closes it.
type tab struct {
	ctx   context.Context
	close context.CancelFunc
}

// New returns a Browser; nothing starts until the first Capture.
func New(opts Options) *Browser {
	if opts.MaxPages <= 0 {
		opts.MaxPages = DefaultMaxPages
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	return &Browser{opts: opts, sem: make(chan struct{}, opts.MaxPages), spare: make(chan tab, 1)}
}

// FindChrome returns the browser binary: path itself when set (a name on
// PATH or a file), else the first known Chromium name on PATH.
func FindChrome(path string) (string, error) {
	if path != "" {
		p, err := exec.LookPath(path)
		if err != nil {
			return "", errorf(toolerr.Unavailable, err, "the configured browser TOOLSVC_CHROME_PATH=%q cannot be run (%v). Next: the operator must install Chromium (Debian: apt-get install chromium) or point TOOLSVC_CHROME_PATH at a Chromium or Chrome binary.", path, errors.Unwrap(err))
		}
		return p, nil
	}
	for _, name := range chromeNames {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errorf(toolerr.Unavailable, exec.ErrNotFound, "web screenshots need Chromium, and none was found on PATH (looked for %s). Next: the operator must install Chromium (Debian/Ubuntu: apt-get install chromium) or set TOOLSVC_CHROME_PATH to a Chromium or Chrome binary; desktop screenshots (type=desktop) do not need it.", strings.Join(chromeNames, ", "))
}

// Starts returns how many times the browser process has been started.
func (b *Browser) Starts() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.starts
}

// Running reports whether a browser process is up.
func (b *Browser) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ctx != nil && b.ctx.Err() == nil
}

// Close stops the browser and the proxy. Calls after Close fail.
func (b *Browser) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.dropSpare()
	b.stopLocked(true)
	if b.proxy != nil {
		err := b.proxy.Close()
		b.proxy = nil
		return err
	}
	return nil
}

// acquire takes a page slot, waiting until ctx ends.
func (b *Browser) acquire(ctx context.Context) error {
	select {
	case b.sem <- struct{}{}:
		return nil
	default:
	}
	select {
	case b.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return errorf(toolerr.Busy, ctx.Err(), "all %d browser pages stayed busy with other screenshots until this call's time ran out. Next: retry in a moment, or give a longer timeout.", cap(b.sem))
	}
}

func (b *Browser) release() { <-b.sem }

// ensure returns the running browser's context, starting the browser if it
// is not running (first use, or it died).
func (b *Browser) ensure(ctx context.Context) (context.Context, *Proxy, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, nil, errorf(toolerr.Unavailable, nil, "the browser is shut down because the service is stopping.")
	}
	if b.ctx != nil && b.ctx.Err() == nil {
		return b.ctx, b.proxy, nil
	}
	if b.ctx != nil {
		b.opts.Log.Warn().Msg("browser died; starting it again")
		b.stopLocked(false)
	}
	path, err := FindChrome(b.opts.ExecPath)
	if err != nil {
		return nil, nil, err
	}
	if b.proxy == nil {
		if b.proxy, err = StartProxy(b.opts.Guard, b.opts.Log); err != nil {
			return nil, nil, errorf(toolerr.Unavailable, err, "the browser's network proxy could not start: %v", err)
		}
	}
	home, err := os.MkdirTemp("", "toolsvc-chromium-")
	if err != nil {
		return nil, nil, errorf(toolerr.Unavailable, err, "cannot create the browser's temporary folder: %v", err)
	}
	out := &tailBuffer{max: 4096}
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), b.allocatorOptions(path, home, out)...)
	logf := func(format string, args ...any) { b.opts.Log.Debug().Msgf("chromedp: "+format, args...) }
	bctx, bcancel := chromedp.NewContext(allocCtx, chromedp.WithErrorf(logf), chromedp.WithLogf(logf))

	// The first Do binds the browser's life to bctx, which has no deadline;
	// the start itself is bounded here.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(bctx) }()
	timer := time.NewTimer(b.opts.StartTimeout)
	defer timer.Stop()
	select {
	case err = <-started:
	case <-timer.C:
		err = fmt.Errorf("no answer within %s", b.opts.StartTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil {
		// Pages must not save files anywhere.
		_, err = chromedp.CallBrowser(bctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{Behavior: browser.SetDownloadBehaviorBehaviorDeny})
	}
	if err != nil {
		bcancel()
		allocCancel()
		os.RemoveAll(home)
		if ctx.Err() != nil {
			return nil, nil, errorf(toolerr.Timeout, err, "the call ended while the browser was starting. Next: retry with a longer timeout; the first web screenshot starts the browser.")
		}
		msg := strings.TrimSpace(out.String())
		if msg != "" {
			msg = " Browser output: " + msg
		}
		return nil, nil, errorf(toolerr.Unavailable, err, "Chromium (%s) did not start: %v.%s Next: the operator should check that '%s --headless --no-sandbox --version' runs, or set TOOLSVC_CHROME_PATH to a working Chromium.", path, err, oneLine(msg), path)
	}
	b.ctx, b.cancel, b.alloc, b.home, b.lastOut = bctx, bcancel, allocCancel, home, out
	b.starts++
	b.opts.Log.Info().Str("path", path).Str("proxy", b.proxy.Addr()).Int("starts", b.starts).Msg("browser started")
	return bctx, b.proxy, nil
}

// newTab opens a blank tab in a fresh browser context of bctx's browser:
// no cookie, storage or cache is shared between calls (or sessions). It
// takes the spare tab when one is ready, and has the next one prepared.
func (b *Browser) newTab(bctx context.Context) tab {
	defer b.prewarm(bctx)
	select {
	case t := <-b.spare:
		if t.ctx.Err() == nil && chromedp.FromContext(t.ctx).Browser == chromedp.FromContext(bctx).Browser {
			return t
		}
		go t.close() // from a browser that has died since
	default:
	}
	ctx, cancel := chromedp.NewContext(bctx, chromedp.WithNewBrowserContext())
	return tab{ctx, cancel}
}

// prewarm opens the spare tab in the background, unless one is ready or
// being opened.
func (b *Browser) prewarm(bctx context.Context) {
	if len(b.spare) > 0 || !b.prewarming.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer b.prewarming.Store(false)
		ctx, cancel := chromedp.NewContext(bctx, chromedp.WithNewBrowserContext())
		// The tab's event loop lives as long as ctx: open it without a
		// deadline; the browser's end ends it.
		if err := chromedp.Do(ctx); err != nil {
			cancel()
			return
		}
		b.mu.Lock()
		closed := b.closed
		b.mu.Unlock()
		if closed {
			cancel()
			return
		}
		select {
		case b.spare <- tab{ctx, cancel}:
		default:
			cancel()
		}
	}()
}

// dropSpare closes the spare tab, if any.
func (b *Browser) dropSpare() {
	select {
	case t := <-b.spare:
		t.close()
	default:
	}
}

// stopLocked stops the browser process, if any, and removes its folders.
func (b *Browser) stopLocked(graceful bool) {
	if b.ctx == nil {
		return
	}
	if graceful && b.ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		_ = chromedp.Cancel(cctx)
		cancel()
	}
	b.cancel()
	b.alloc() // waits for the process to exit and its profile to be removed
	// Helpers that escaped the browser's process tree (crash handlers) name
	// the home folder on their command line.
	killUsing(b.home)
	os.RemoveAll(b.home)
	b.ctx, b.cancel, b.alloc, b.home = nil, nil, nil, ""
}

// kill ends the browser process abruptly, as a crash would. Tests use it.
func (b *Browser) kill() error {
	b.mu.Lock()
	ctx := b.ctx
	b.mu.Unlock()
	if ctx == nil {
		return errors.New("no browser")
	}
	c := chromedp.FromContext(ctx)
	if c == nil || c.Browser == nil || c.Browser.Process() == nil {
		return errors.New("no browser process")
	}
	if err := c.Browser.Process().Kill(); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// allocatorOptions are the browser's flags. The proxy settings are the
// wall: every request, loopback included, goes to the guarded proxy. The
// rest keeps Chromium from talking on its own (updates, sync, metrics,
// QUIC, WebRTC over UDP, DNS prefetch) and from keeping state.
func (b *Browser) allocatorOptions(path, home string, out *tailBuffer) []chromedp.ExecAllocatorOption {
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + home + "/.config", "XDG_CACHE_HOME=" + home + "/.cache", "LANG=C.UTF-8"}
	if p := os.Getenv("PATH"); p != "" {
		env = append(env, "PATH="+p)
	}
	flags := []struct {
		name  string
		value any
	}{
		{"headless", true},
		{"hide-scrollbars", true},
		{"mute-audio", true},
		{"no-first-run", true},
		{"no-default-browser-check", true},
		{"disable-gpu", true},
		{"disable-dev-shm-usage", true},
		{"disable-extensions", true},
		{"disable-default-apps", true},
		{"disable-sync", true},
		{"disable-background-networking", true},
		{"disable-component-update", true},
		{"disable-breakpad", true},
		{"disable-crash-reporter", true}, // no crashpad handler outliving the browser
		{"disable-client-side-phishing-detection", true},
		{"disable-domain-reliability", true},
		{"safebrowsing-disable-auto-update", true},
		{"metrics-recording-only", true},
		{"no-pings", true},
		{"password-store", "basic"},
		{"use-mock-keychain", true},
		{"force-color-profile", "srgb"},
		{"block-new-web-contents", true}, // popups and window.open fail
		{"disable-features", "Translate,MediaRouter,OptimizationHints,DnsOverHttps,NetworkPrediction"},
		// QUIC is UDP and would not go through an HTTP proxy.
		{"disable-quic", true},
		{"dns-prefetch-disable", true},
		// WebRTC may use only the proxy, never UDP of its own: no host
		// candidates, no STUN or TURN over UDP, and TURN over TCP only as a
		// CONNECT through the proxy. (The switch is this one; Chromium
		// ignores "force-webrtc-ip-handling-policy".)
		{"webrtc-ip-handling-policy", "disable_non_proxied_udp"},
		{"proxy-server", "http://" + b.proxy.Addr()},
		// "<-loopback>" removes Chromium's implicit bypass of localhost and
		// 127.0.0.0/8, so loopback addresses go through the guard too.
		{"proxy-bypass-list", "<-loopback>"},
		// Nothing should need the browser's own resolver (the proxy resolves);
		// if anything tries, it finds nothing.
		{"host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"},
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.NoInheritEnv, // the service's secrets stay out of the browser
		chromedp.Env(env...),
		chromedp.CombinedOutput(out),
	}
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	for _, f := range flags {
		opts = append(opts, chromedp.Flag(f.name, f.value))
	}
	return opts
}

// killUsing kills the processes whose command line names a path under dir, a folder
// made for one browser run.
func killUsing(dir string) {
	if dir == "" {
		return
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmd, []byte(dir+"/")) {
			continue
		}
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Kill()
		}
	}
}

// tailBuffer keeps the last max bytes written to it, for start errors.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

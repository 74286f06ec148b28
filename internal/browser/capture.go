package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"iter"
	"math"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// Bounds of a capture.
const (
	MinWidth, MaxWidth   = 320, 3840
	MinHeight, MaxHeight = 240, 2160
	// MaxFullPageHeight bounds full-page captures (Chromium's own texture
	// limit is about this size too).
	MaxFullPageHeight = 16384
	maxBlockedListed  = 10
	maxTrackedReqs    = 4096
)

// Request describes one web screenshot. The deadline comes from the
// context.
type Request struct {
	URL      string
	Width    int
	Height   int
	FullPage bool
	Wait     time.Duration // extra time after the load event, for scripts
	// Timeout bounds the wait for a free page and, separately, the page's
	// own work (load, wait, capture); a browser start in between is bounded
	// by Options.StartTimeout and ctx. Zero: ctx alone.
	Timeout time.Duration
}

// Shot is a captured page.
type Shot struct {
	PNG      []byte
	Width    int // pixels
	Height   int
	FinalURL string
	Title    string
	Status   int64    // HTTP status of the main document, 0 if unknown
	Blocked  []string // requests of the page refused by policy ("url: reason"), at most maxBlockedListed
	NBlocked int      // how many were refused in all
	Notes    []string // things the model should know (still loading, cut height)
}

// CheckPageURL parses raw and refuses anything but an absolute http or
// https URL the guard allows.
func (b *Browser) CheckPageURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	// Messages quote the address shortened.
	shown := runes.Shorten(raw, runes.Echo)
	if err != nil {
		return nil, errorf(toolerr.InvalidArguments, err, "'%s' is not a valid URL (%v). Next: give a full http:// or https:// address.", shown, errors.Unwrap(err))
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return nil, errorf(toolerr.InvalidArguments, nil, "'%s' has no scheme. Next: give a full address such as https://%s.", shown, shown)
	default:
		return nil, errorf(toolerr.PolicyDenied, nil, "the %s: scheme is refused: only http and https pages can be captured (no file://, chrome://, data:, javascript: or other schemes). Next: give an http:// or https:// address.", runes.Shorten(u.Scheme, runes.Echo))
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, errorf(toolerr.InvalidArguments, nil, "'%s' has no host name. Next: give a full address such as https://example.com/page.", shown)
	}
	if u.User != nil {
		return nil, errorf(toolerr.InvalidArguments, nil, "URLs with a user name or password are not accepted. Next: give the address without 'user:password@'.")
	}
	if err := b.opts.Guard.CheckURL(u); err != nil {
		return nil, err
	}
	return u, nil
}

// Capture loads req.URL in a new tab of the shared browser and returns a PNG
// of it. It waits for a free page slot within ctx, starts the browser when
// it is not running, and tries once more on a fresh browser when the
// browser died under the call.
func (b *Browser) Capture(ctx context.Context, req Request) (*Shot, error) {
	u, err := b.CheckPageURL(req.URL)
	if err != nil {
		return nil, err
	}
	req.Width = clamp(req.Width, MinWidth, MaxWidth)
	req.Height = clamp(req.Height, MinHeight, MaxHeight)
	within := func(ctx context.Context) (context.Context, context.CancelFunc) {
		if req.Timeout > 0 {
			return context.WithTimeout(ctx, req.Timeout)
		}
		return context.WithCancel(ctx)
	}
	actx, cancel := within(ctx)
	err = b.acquire(actx)
	cancel()
	if err != nil {
		return nil, err
	}
	var closing sync.WaitGroup
	// The slot is free once every tab of this call is closed; closing runs
	// after the result is returned, off the caller's time.
	defer func() {
		go func() {
			closing.Wait()
			b.release()
		}()
	}()
	for attempt := 0; ; attempt++ {
		bctx, proxy, err := b.ensure(ctx)
		if err != nil {
			return nil, err
		}
		tb := b.newTab(bctx)
		pctx, cancel := within(ctx)
		shot, err := b.capture(pctx, tb.ctx, proxy, u, req)
		cancel()
		closing.Add(1)
		go func() {
			defer closing.Done()
			tb.close()
		}()
		if err == nil {
			return shot, nil
		}
		if bctx.Err() == nil || ctx.Err() != nil {
			return nil, b.explain(pctx, err)
		}
		b.opts.Log.Warn().Err(err).Msg("browser died during a capture")
		if attempt > 0 {
			return nil, errorf(toolerr.Unavailable, err, "the browser crashed twice while loading this page. Next: try another page; the browser restarts by itself on the next call.")
		}
	}
}

// explain turns a low-level failure into a coded error.
func (b *Browser) explain(ctx context.Context, err error) error {
	var coded *toolerr.Error
	switch {
	case errors.As(err, &coded):
		return err
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return errorf(toolerr.Timeout, err, "the screenshot did not finish in time. Next: give a larger timeout, or a page that loads faster.")
	case ctx.Err() != nil:
		return errorf(toolerr.Canceled, err, "the screenshot was canceled.")
	}
	return errorf(toolerr.ToolError, err, "the browser failed: %v", err)
}

// capture runs one page in the tab of tabCtx, which the caller closes.
func (b *Browser) capture(ctx, tabCtx context.Context, proxy *Proxy, u *url.URL, req Request) (*Shot, error) {
	start := time.Now()
	runCtx, runCancel := context.WithCancel(tabCtx)
	defer runCancel()
	if dl, ok := ctx.Deadline(); ok {
		var c context.CancelFunc
		runCtx, c = context.WithDeadline(runCtx, dl)
		defer c()
	}
	defer context.AfterFunc(ctx, runCancel)()

	if err := chromedp.Do(runCtx); err != nil { // opens the tab
		return nil, err
	}
	t := chromedp.FromContext(runCtx).Target
	mon := &monitor{main: cdp.FrameID(t.TargetID), proxy: proxy, since: start, urls: map[network.RequestID]string{}}
	if err := b.setUpTab(runCtx, t, mon, proxy, req); err != nil {
		return nil, err
	}

	shot := &Shot{}
	if err := navigate(runCtx, t, mon, u, start, shot); err != nil {
		return nil, err
	}

	if req.Wait > 0 {
		timer := time.NewTimer(req.Wait)
		select {
		case <-timer.C:
		case <-runCtx.Done():
			timer.Stop()
			return nil, runCtx.Err()
		}
	}

	if err := screenshot(runCtx, t, req, shot); err != nil {
		return nil, err
	}
	shot.FinalURL, _ = chromedp.Run(runCtx, chromedp.Location())
	shot.Title, _ = chromedp.Run(runCtx, chromedp.Title())
	shot.Blocked, shot.NBlocked = mon.blockedList()
	return shot, nil
}

// setUpTab makes the tab t report to mon, pass its requests through the
// policy and proxy, run without WebRTC and show req's viewport.
func (b *Browser) setUpTab(runCtx context.Context, t *chromedp.Target, mon *monitor, proxy *Proxy, req Request) error {
	if err := chromedp.Listen(runCtx, mon.handle); err != nil {
		return err
	}
	paused := chromedp.Events(runCtx, fetch.RequestPaused)
	go b.intercept(runCtx, t, paused, mon)
	auths := chromedp.Events(runCtx, fetch.AuthRequired)
	go answerAuth(runCtx, t, auths, proxy)
	if _, err := cdp.Call(runCtx, t, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*"}}, HandleAuthRequests: ptr(true)}); err != nil {
		return err
	}
	if _, err := cdp.Call(runCtx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: noWebRTC}); err != nil {
		return err
	}
	return chromedp.Do(runCtx, chromedp.EmulateViewport(int64(req.Width), int64(req.Height)))
}

// navigate loads u in the tab t within the load budget, recording in shot
// the status and, when a page that has arrived never finishes loading,
// a note that it was captured as it was. Pages the network policy refused
// or could not reach, and pages that never arrived, are errors.
func navigate(runCtx context.Context, t *chromedp.Target, mon *monitor, u *url.URL, start time.Time, shot *Shot) error {
	loadCtx, loadCancel := context.WithTimeout(runCtx, loadBudget(runCtx))
	resp, navErr := chromedp.Run(loadCtx, chromedp.NavigateResponse(u.String()))
	loadCancel()
	switch {
	case navErr == nil:
		if resp != nil {
			shot.Status = resp.Status
			if reason := header(resp.Headers, headerDenied); reason != "" {
				return errorf(toolerr.PolicyDenied, nil, "the page %s was refused by the network policy: %s. Next: use a public address; the operator can open exceptions with TOOLSVC_NET_ALLOW_HOSTS or TOOLSVC_NET_ALLOW_CIDRS.", runes.Shorten(resp.URL, runes.Echo), reason)
			}
			if reason := header(resp.Headers, headerUnreachable); reason != "" {
				return errorf(toolerr.Unavailable, nil, "the page %s could not be reached: %s. Next: check the address.", runes.Shorten(resp.URL, runes.Echo), reason)
			}
		}
	case runCtx.Err() == nil && errors.Is(navErr, context.DeadlineExceeded):
		if !mon.committed() {
			return errorf(toolerr.Timeout, navErr, "%s did not answer within %s. Next: check the address, or give a larger timeout.", runes.Shorten(u.String(), runes.Echo), time.Since(start).Round(time.Second))
		}
		// The document is there but something on it never finishes
		// loading; take what is shown.
		_, _ = cdp.Call(runCtx, t, page.StopLoading, cdp.Empty{})
		shot.Notes = append(shot.Notes, fmt.Sprintf("the page was still loading after %s; it was captured as it was", time.Since(start).Round(time.Second)))
	default:
		var le *chromedp.LoadError
		if errors.As(navErr, &le) {
			return mon.loadFailure(u, le.ErrorText)
		}
		return navErr
	}
	return nil
}

// screenshot captures the tab t as a PNG into shot: the viewport, or with
// req.FullPage the whole page up to MaxFullPageHeight.
func screenshot(runCtx context.Context, t *chromedp.Target, req Request, shot *Shot) error {
	params := page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatPng, FromSurface: ptr(true)}
	if req.FullPage {
		m, err := cdp.Call(runCtx, t, page.GetLayoutMetrics, cdp.Empty{})
		if err != nil {
			return err
		}
		h := req.Height
		if m.CSSContentSize != nil {
			h = int(math.Ceil(m.CSSContentSize.Height))
		}
		if h > MaxFullPageHeight {
			shot.Notes = append(shot.Notes, fmt.Sprintf("the page is %d px tall; the capture stops at %d px", h, MaxFullPageHeight))
		}
		h = clamp(h, req.Height, MaxFullPageHeight)
		params.Clip = &page.Viewport{Width: float64(req.Width), Height: float64(h), Scale: 1}
		params.CaptureBeyondViewport = ptr(true)
	}
	r, err := cdp.Call(runCtx, t, page.CaptureScreenshot, params)
	if err != nil {
		return err
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(r.Data))
	if err != nil {
		return fmt.Errorf("the browser returned an unreadable PNG: %w", err)
	}
	shot.PNG, shot.Width, shot.Height = r.Data, cfg.Width, cfg.Height
	return nil
}

// noWebRTC runs before any script of every document of the tab and removes
// WebRTC's interfaces, so a page cannot even try. It is the second layer:
// the wall is the webrtc-ip-handling-policy switch, which also holds for
// the documents this script does not reach (a cross-site iframe runs in a
// process of its own, outside the tab's DevTools session).
const noWebRTC = `(() => {
  for (const name of Object.getOwnPropertyNames(globalThis)) {
    if (/^(webkit)?RTC/.test(name)) { try { delete globalThis[name]; } catch (e) {} }
  }
})();`

// loadBudget leaves part of the remaining time for the capture itself, so
// a page that never finishes loading is still captured.
func loadBudget(ctx context.Context) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return time.Minute
	}
	left := time.Until(dl)
	reserve := min(left/4, 5*time.Second)
	return left - reserve
}

// intercept judges every request the tab makes before it leaves: schemes
// other than http and https are refused (file://, chrome://, ...), and so
// is any URL the guard refuses by its look (a forbidden literal address).
// The proxy still judges what passes, by resolved address.
func (b *Browser) intercept(ctx context.Context, t *chromedp.Target, paused iter.Seq2[fetch.EventRequestPaused, error], mon *monitor) {
	for ev, err := range paused {
		if err != nil {
			return
		}
		reason := b.judge(&ev)
		if reason == "" {
			_, err = cdp.Call(ctx, t, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		} else {
			mon.block(ev.Request.URL, reason, ev.FrameID == mon.main && ev.ResourceType == network.ResourceTypeDocument)
			_, err = cdp.Call(ctx, t, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonBlockedByClient})
		}
		if err != nil && ctx.Err() != nil {
			return
		}
	}
}

// answerAuth gives the proxy its credentials when it asks for them, and
// nothing to anyone else: a site's own login prompt (401) is cancelled, so
// the page shows the site's answer.
func answerAuth(ctx context.Context, t *chromedp.Target, auths iter.Seq2[fetch.EventAuthRequired, error], proxy *Proxy) {
	for ev, err := range auths {
		if err != nil {
			return
		}
		resp := &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseCancelAuth}
		if c := ev.AuthChallenge; c != nil && c.Source == fetch.AuthChallengeSourceProxy && isProxyOrigin(c.Origin, proxy.Addr()) {
			user, pass := proxy.Credentials()
			resp = &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseProvideCredentials, Username: user, Password: pass}
		}
		_, err = cdp.Call(ctx, t, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{RequestID: ev.RequestID, AuthChallengeResponse: resp})
		if err != nil && ctx.Err() != nil {
			return
		}
	}
}

// isProxyOrigin reports whether a challenge's origin ("http://host:port",
// or host:port) is the proxy at addr.
func isProxyOrigin(origin, addr string) bool {
	if u, err := url.Parse(origin); err == nil && u.Host != "" {
		origin = u.Host
	}
	return origin == addr
}

// judge returns why a paused request must not go out, or "".
func (b *Browser) judge(ev *fetch.EventRequestPaused) string {
	if ev.Request == nil {
		return "no request"
	}
	u, err := url.Parse(ev.Request.URL)
	if err != nil {
		return "unreadable URL"
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		if err := b.opts.Guard.CheckURL(u); err != nil {
			return err.Error()
		}
		return ""
	case "data", "blob":
		// In-memory content, no network; but never as the page itself.
		if ev.ResourceType == network.ResourceTypeDocument {
			return "a " + u.Scheme + ": document is not allowed"
		}
		return ""
	}
	return "the " + u.Scheme + ": scheme is not allowed; only http and https"
}

// monitor follows one tab's network events: the main document's URL, and
// the requests the policy refused. handle runs in the tab's event loop.
type monitor struct {
	main  cdp.FrameID
	proxy *Proxy
	since time.Time

	mu        sync.Mutex
	docURL    string // the main frame's latest document request (after redirects)
	commit    bool
	urls      map[network.RequestID]string
	blocked   []string
	nBlocked  int
	docDenied map[string]string // main-frame URL -> reason, refused by intercept
}

func (m *monitor) handle(ev any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		if ev.Request == nil {
			return
		}
		if ev.Type == network.ResourceTypeDocument && ev.FrameID == m.main {
			m.docURL = ev.Request.URL
		}
		if len(m.urls) < maxTrackedReqs {
			m.urls[ev.RequestID] = ev.Request.URL
		}
	case *network.EventLoadingFailed:
		if !strings.Contains(ev.ErrorText, "TUNNEL_CONNECTION_FAILED") && !strings.Contains(ev.ErrorText, "PROXY") {
			return
		}
		raw := m.urls[ev.RequestID]
		if u, err := url.Parse(raw); err == nil && raw != "" {
			if r, ok := m.proxy.Refused(u.Hostname(), m.since); ok && r.Denied {
				m.addLocked(raw, r.Reason)
			}
		}
	case *network.EventResponseReceived:
		if ev.Response != nil {
			if reason := header(ev.Response.Headers, headerDenied); reason != "" {
				m.addLocked(ev.Response.URL, reason)
			}
		}
	case *page.EventFrameNavigated:
		if ev.Frame != nil && ev.Frame.ParentID == "" && ev.Frame.ID == m.main {
			s := strings.ToLower(ev.Frame.URL)
			if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
				m.commit = true
			}
		}
	}
}

func (m *monitor) committed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.commit
}

// block records a request refused by intercept.
func (m *monitor) block(raw, reason string, mainDoc bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mainDoc {
		if m.docDenied == nil {
			m.docDenied = map[string]string{}
		}
		m.docDenied[raw] = reason
	}
	m.addLocked(raw, reason)
}

func (m *monitor) addLocked(raw, reason string) {
	m.nBlocked++
	if len(m.blocked) < maxBlockedListed {
		// The guard's advice ("Next: ...") is said once by the tool, not per URL.
		if i := strings.Index(reason, " Next:"); i > 0 {
			reason = reason[:i]
		}
		m.blocked = append(m.blocked, runes.Shorten(raw, runes.Echo)+": "+reason)
	}
}

func (m *monitor) blockedList() ([]string, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.blocked...), m.nBlocked
}

// loadFailure explains why the main document did not load.
func (m *monitor) loadFailure(u *url.URL, errText string) error {
	m.mu.Lock()
	doc := m.docURL
	denied := m.docDenied
	m.mu.Unlock()
	if doc == "" {
		doc = u.String()
	}
	if reason, ok := denied[doc]; ok {
		return errorf(toolerr.PolicyDenied, nil, "the page led to %s, which is refused: %s. Next: use a public http(s) address; the operator can open exceptions with TOOLSVC_NET_ALLOW_HOSTS or TOOLSVC_NET_ALLOW_CIDRS.", runes.Shorten(doc, runes.Echo), reason)
	}
	for _, reason := range denied {
		// A redirect the monitor did not see as the latest document.
		return errorf(toolerr.PolicyDenied, nil, "loading %s was refused: %s. Next: use a public http(s) address.", runes.Shorten(u.String(), runes.Echo), reason)
	}
	if du, err := url.Parse(doc); err == nil {
		if r, ok := m.proxy.Refused(du.Hostname(), m.since); ok {
			if r.Denied {
				return errorf(toolerr.PolicyDenied, nil, "the network policy refused %s: %s. Next: use a public address; the operator can open exceptions with TOOLSVC_NET_ALLOW_HOSTS or TOOLSVC_NET_ALLOW_CIDRS.", runes.Shorten(doc, runes.Echo), r.Reason)
			}
			return errorf(toolerr.Unavailable, nil, "%s could not be reached: %s. Next: check the address and that the site is up.", runes.Shorten(doc, runes.Echo), r.Reason)
		}
	}
	return errorf(toolerr.Unavailable, nil, "%s could not be loaded (%s). Next: check the address and that the site is up.", runes.Shorten(doc, runes.Echo), errText)
}

// header returns a response header's value, whatever its case.
func header(h network.Headers, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			if s, ok := v.(string); ok {
				return s
			}
		}
	}
	return ""
}

func clamp(v, lo, hi int) int {
	return max(lo, min(v, hi))
}

func ptr[T any](v T) *T { return &v }

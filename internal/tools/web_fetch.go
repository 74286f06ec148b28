package tools

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/countbot/toolsvc/internal/extract"
	"github.com/countbot/toolsvc/internal/netguard"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/runes"
	"github.com/countbot/toolsvc/internal/tooldef"
	"github.com/countbot/toolsvc/internal/toolerr"
	"github.com/countbot/toolsvc/internal/tracing"
)

// WebFetchOptions bound what one web_fetch call may cost.
type WebFetchOptions struct {
	MaxBytes      int64         // response body bytes read per page (decompressed)
	Timeout       time.Duration // per page: connect, redirects, headers and body
	MaxRedirects  int           // per page
	MaxConcurrent int           // pages of one batch fetched at once
	MaxURLs       int           // pages in one batch
	// Tracer, when set, gives each page a client span (GET), with the
	// network guard's decision on it. Nil: none.
	Tracer *tracing.Tracer
}

// WebFetch fetches web pages through the network guard and returns their
// readable text.
type WebFetch struct {
	tooldef.Def[webFetchArgs]
	guard   *netguard.Guard
	client  *http.Client
	extract *extract.Extractor
	opts    WebFetchOptions
	// extracting bounds the HTML parses running at once over all calls: a
	// parsed 10 MiB page takes far more memory than its bytes, and
	// extraction is CPU-bound anyway.
	extracting chan struct{}
}

// NewWebFetch returns web_fetch. Every connection it makes goes through
// guard.
func NewWebFetch(guard *netguard.Guard, ex *extract.Extractor, opts WebFetchOptions) *WebFetch {
	def := tooldef.New[webFetchArgs]("web_fetch",
		"Fetch web pages over http(s) and return their main readable content (navigation, ads and boilerplate removed) as JSON: "+
			"url, finalUrl, status, title, extractor, truncated, length, text, and a warning when the page is nearly empty (rendered by JavaScript) or was cut. "+
			"Pass url for one page, or urls for several at once (results in the same order; a failed page reports its error and the others are still returned). "+
			"extractMode=markdown keeps headings, links, lists, tables and code. JSON responses are pretty-printed, plain text is returned as is; images, PDFs and other binary files are refused. "+
			"Internal, private and loopback addresses are refused.",
		func(p tooldef.Prop) {
			p.Prop("url").MinLength(1).MaxLength(8192)
			p.Prop("urls").MinItems(1).MaxItems(opts.MaxURLs).Items().MinLength(1).MaxLength(8192)
			p.Prop("extractMode").Enum("text", "markdown")
			p.Prop("maxChars").Minimum(100).Maximum(maxFetchChars).
				Description(fmt.Sprintf("Most characters of text returned per page (default %d); the pages of a batch share at most %d", defaultFetchChars, maxFetchChars))
		},
		tooldef.Sample(webFetchArgs{URL: "http://127.0.0.1:9/"}),
		tooldef.Title("Fetch web page"), tooldef.Hints(tooldef.ReadOnly, tooldef.Idempotent, tooldef.OpenWorld))
	return &WebFetch{
		Def:        def,
		guard:      guard,
		client:     guard.Client(0, opts.MaxRedirects), // the per-page context carries the deadline
		extract:    ex,
		opts:       opts,
		extracting: make(chan struct{}, runtime.NumCPU()),
	}
}

// Limits of maxChars; the default is CountBot's, so that agents written
// for it get pages of the length they expect.
const (
	defaultFetchChars = 50000
	maxFetchChars     = 200000
	// nearlyEmpty is the text length under which a page is reported as
	// (probably) rendered by JavaScript.
	nearlyEmpty = 200
)

// webFetchArgs: exactly one of url and urls is given, a rule, not a
// schema requirement.
type webFetchArgs struct {
	URL         string   `json:"url,omitempty" jsonschema:"The http:// or https:// URL to fetch"`
	URLs        []string `json:"urls,omitempty" jsonschema:"Several URLs to fetch in one call, instead of url; results come back in the same order"`
	ExtractMode string   `json:"extractMode,omitempty" jsonschema:"text (default): plain readable text; markdown: keeps headings, links, lists, tables and code"`
	MaxChars    int      `json:"maxChars,omitempty"`
}

// fetchResult is one page's result, with the fields CountBot's web_fetch
// returns, so that agents written for it read it unchanged.
// A failed page of a batch carries only URL, Error and Code.
type fetchResult struct {
	URL         string `json:"url"`
	FinalURL    string `json:"finalUrl,omitempty"`
	Status      int    `json:"status,omitempty"`
	ContentType string `json:"contentType,omitempty"`
	Title       string `json:"title,omitempty"`
	Extractor   string `json:"extractor,omitempty"`
	Truncated   bool   `json:"truncated"`
	Length      int    `json:"length"`
	Text        string `json:"text"`
	Warning     string `json:"warning,omitempty"`
	Error       string `json:"error,omitempty"`
	Code        string `json:"code,omitempty"`

	analysedPart bool // only the beginning of a very long page was extracted
}

type batchResult struct {
	Batch   bool          `json:"batch"`
	Count   int           `json:"count"`
	Results []fetchResult `json:"results"`
}

// Rules are checked by the registry before Execute and stated in the
// description.
func (t *WebFetch) Rules() []registry.Rule {
	return []registry.Rule{registry.ExactlyOne("url", "urls")}
}

// Timeout covers a full batch: the pages run MaxConcurrent at a time, each
// within its own Timeout.
func (t *WebFetch) Timeout() time.Duration {
	rounds := (t.opts.MaxURLs + t.opts.MaxConcurrent - 1) / t.opts.MaxConcurrent
	return time.Duration(rounds)*t.opts.Timeout + 15*time.Second
}

func (t *WebFetch) Execute(ctx context.Context, raw json.RawMessage) (string, error) {
	args, err := t.Decode(raw)
	if err != nil {
		return "", err
	}
	mode := extract.ModeText
	if args.ExtractMode == string(extract.ModeMarkdown) {
		mode = extract.ModeMarkdown
	}
	maxChars := args.MaxChars
	if maxChars <= 0 {
		maxChars = defaultFetchChars
	}
	maxChars = min(maxChars, maxFetchChars)

	if args.URL != "" {
		res, err := t.fetch(ctx, args.URL, mode, maxChars, false)
		if err != nil {
			return "", err
		}
		return marshalResult(res)
	}
	if len(args.URLs) > t.opts.MaxURLs {
		return "", toolerr.Errorf(toolerr.InvalidArguments, "At most %d URLs per call. Next: split the list into several calls.", t.opts.MaxURLs)
	}
	// The pages of a batch share one budget, so that ten pages cannot
	// return ten times what one may.
	return t.batch(ctx, args.URLs, mode, min(maxChars, maxFetchChars/len(args.URLs)))
}

// batch fetches several pages, MaxConcurrent at a time, and reports each
// one's result or error in the order given.
func (t *WebFetch) batch(ctx context.Context, urls []string, mode extract.Mode, maxChars int) (string, error) {
	out := batchResult{Batch: true, Count: len(urls), Results: make([]fetchResult, len(urls))}
	sem := make(chan struct{}, t.opts.MaxConcurrent)
	var wg sync.WaitGroup
	for i, u := range urls {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res, err := t.fetch(ctx, u, mode, maxChars, true)
			if err != nil {
				res = fetchResult{URL: u, Error: err.Error(), Code: toolerr.ErrorCode(err)}
			}
			out.Results[i] = res
			state := "fetched"
			if err != nil {
				state = "failed"
			}
			registry.Progress(ctx, "page", fmt.Sprintf("page %d %s: %s", i, state, u))
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	return marshalResult(out)
}

func marshalResult(v any) (string, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// fetch gets one page within the per-page deadline and extracts its text.
// Errors are coded and written for a model.
func (t *WebFetch) fetch(ctx context.Context, raw string, mode extract.Mode, maxChars int, batch bool) (fetchResult, error) {
	if t.opts.Tracer == nil {
		return t.fetchPage(ctx, raw, mode, maxChars, batch)
	}
	ctx, span := t.opts.Tracer.StartFetch(ctx, strings.TrimSpace(raw))
	res, err := t.fetchPage(ctx, raw, mode, maxChars, batch)
	decision := tracing.NetguardAllowed
	if errors.Is(err, netguard.ErrRefused) {
		decision = tracing.NetguardRefused
	}
	span.EndFetch(decision, res.Status, err)
	return res, err
}

// fetchPage is fetch without a span.
func (t *WebFetch) fetchPage(ctx context.Context, raw string, mode extract.Mode, maxChars int, batch bool) (fetchResult, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || !u.IsAbs() {
		return fetchResult{}, toolerr.Errorf(toolerr.InvalidArguments, "%q is not an absolute URL. Next: pass a full URL such as https://example.com/page.", runes.Shorten(raw, runes.Echo))
	}
	if err := t.guard.CheckURL(u); err != nil {
		return fetchResult{}, err
	}
	u.Fragment, u.RawFragment = "", ""
	pctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	defer cancel()

	req, err := fetchRequest(pctx, u, raw)
	if err != nil {
		return fetchResult{}, err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return fetchResult{}, t.explain(ctx, pctx, u, err)
	}
	defer resp.Body.Close()
	return t.readPage(ctx, pctx, u, raw, resp, mode, maxChars, batch)
}

// readPage reads the response to the GET for u (raw as the model wrote
// it) within the page's deadline pctx, and extracts its text: HTML by
// mode, JSON indented, plain text as is, all cut to maxChars.
func (t *WebFetch) readPage(ctx, pctx context.Context, u *url.URL, raw string, resp *http.Response, mode extract.Mode, maxChars int, batch bool) (fetchResult, error) {
	res := fetchResult{URL: raw, FinalURL: resp.Request.URL.String(), Status: resp.StatusCode}
	ctype := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ctype)
	kind := classifyType(mt)
	if kind == kindBinary {
		return fetchResult{}, toolerr.Errorf(toolerr.ToolError,
			"%s is %s, not a web page: web_fetch reads HTML, JSON and plain text only. Next: use another source for this file, or a page that describes it.", runes.Shorten(res.FinalURL, runes.Echo), runes.Shorten(describeType(mt), runes.Echo))
	}

	body, cut, err := readBounded(resp.Body, t.opts.MaxBytes)
	if err != nil && len(body) == 0 {
		return fetchResult{}, t.explain(ctx, pctx, u, err)
	}
	if kind == kindUnknown {
		kind = classifyType(sniff(body))
		if kind == kindBinary || kind == kindUnknown {
			return fetchResult{}, toolerr.Errorf(toolerr.ToolError,
				"%s is binary data (%s), not a web page: web_fetch reads HTML, JSON and plain text only. Next: use another source for this content.", runes.Shorten(res.FinalURL, runes.Echo), sniff(body))
		}
	}
	res.ContentType = mt
	if res.ContentType == "" {
		res.ContentType = sniff(body)
	}
	var warnings []string
	if w := t.readWarning(pctx, cut, err); w != "" {
		warnings = append(warnings, w)
	}
	if err != nil {
		res.Truncated = true
	}

	final := resp.Request.URL
	switch kind {
	case kindHTML:
		// The page's deadline bounds the network; extraction is bounded by
		// the extractor's analysis cap and the call's deadline.
		if err := t.extractHTML(ctx, &res, body, ctype, final, mode); err != nil {
			return fetchResult{}, t.explain(ctx, pctx, u, err)
		}
	case kindJSON:
		if !extractJSON(&res, body, ctype) && !cut {
			warnings = append(warnings, "The response claims to be JSON but does not parse; returned as is.")
		}
	default:
		text, _ := extract.Decode(body, ctype, false)
		res.Text, res.Extractor = strings.TrimSpace(string(text)), extract.ByRaw
	}

	if res.analysedPart {
		res.Truncated = true
		warnings = append(warnings, "The page is very long; only its first part was analysed. Next: fetch a more specific page (a single chapter or section) if what you need is missing.")
	}
	if resp.StatusCode >= 400 {
		return fetchResult{}, statusError(res)
	}
	if kind == kindHTML && utf8.RuneCountInString(res.Text) < nearlyEmpty {
		warnings = append(warnings, nearlyEmptyWarning(body))
	}
	if w := cutText(&res, maxChars, batch); w != "" {
		warnings = append(warnings, w)
	}
	res.Truncated = res.Truncated || cut
	res.Length = utf8.RuneCountInString(res.Text)
	res.Warning = strings.Join(warnings, " ")
	return res, nil
}

// fetchRequest is the GET for u, with a browser's headers, as some sites
// answer other clients differently or not at all.
func fetchRequest(ctx context.Context, u *url.URL, raw string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, toolerr.Errorf(toolerr.InvalidArguments, "%q is not a valid URL. Next: check it.", runes.Shorten(raw, runes.Echo))
	}
	req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36 toolsvc-web_fetch")
	req.Header.Set("Accept", "text/html,application/xhtml+xml,application/json;q=0.9,text/plain;q=0.8,*/*;q=0.5")
	req.Header.Set("Accept-Language", "en-US,en;q=0.9,zh-CN;q=0.8,zh;q=0.7")
	return req, nil
}

// readWarning says why only part of the body was read: it was over the
// size cap (cut), the page's deadline (pctx) passed, or the connection
// broke (err); "" when the whole body arrived.
func (t *WebFetch) readWarning(pctx context.Context, cut bool, err error) string {
	switch {
	case cut:
		return fmt.Sprintf("The response was larger than %s; only the first %s were read.", humanSize(t.opts.MaxBytes), humanSize(t.opts.MaxBytes))
	case err != nil && pctx.Err() != nil:
		return fmt.Sprintf("The page did not finish loading within %s; this is the part that arrived.", t.opts.Timeout)
	case err != nil:
		return "The connection broke before the whole page arrived; this is the part that arrived."
	}
	return ""
}

// extractJSON sets res's text to the body as indented JSON, or as is when
// it does not parse, which it reports with false.
func extractJSON(res *fetchResult, body []byte, ctype string) bool {
	text, _ := extract.Decode(body, ctype, false)
	pretty, err := extract.JSON(text)
	if err != nil {
		res.Text, res.Extractor = string(text), extract.ByRaw
		return false
	}
	res.Text, res.Extractor = pretty, extract.ByJSON
	return true
}

// nearlyEmptyWarning is the warning for an HTML page with almost no text:
// with scripts, it is probably rendered in the browser.
func nearlyEmptyWarning(body []byte) string {
	if scriptTag.Match(body) {
		return "The page has almost no text without JavaScript: it is probably rendered in the browser. Next: take a screenshot of it (screenshot with type=web), or look for the site's API or another source."
	}
	return "The page has almost no readable text."
}

// cutText cuts res's text to maxChars characters, and returns the
// warning that says so and how to get more, or "" when it fits. batch
// says whether the page is one of several fetched together.
func cutText(res *fetchResult, maxChars int, batch bool) string {
	n := utf8.RuneCountInString(res.Text)
	if n <= maxChars {
		return ""
	}
	res.Text = runes.Prefix(res.Text, maxChars)
	res.Truncated = true
	next := fmt.Sprintf("call again with a larger maxChars (up to %d)", maxFetchChars)
	switch {
	case maxChars >= maxFetchChars:
		next = "look for a more specific page"
	case batch:
		next = fmt.Sprintf("pages of a batch share %d characters; fetch this URL alone (url instead of urls) to get more", maxFetchChars)
	}
	return fmt.Sprintf("Text cut at %d of %d characters. Next: %s.", maxChars, n, next)
}

// extractHTML decodes the page's charset and extracts its main content.
func (t *WebFetch) extractHTML(ctx context.Context, res *fetchResult, body []byte, ctype string, final *url.URL, mode extract.Mode) error {
	select {
	case t.extracting <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-t.extracting }()
	text, _ := extract.Decode(body, ctype, true)
	page, err := t.extract.HTML(ctx, text, final, mode)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	res.Title, res.Text, res.Extractor = page.Title, page.Text, page.Extractor
	if err != nil {
		res.Extractor = "none"
	}
	res.analysedPart = page.Cut
	return nil
}

// readBounded reads at most limit bytes; cut reports that there was more.
func readBounded(r io.Reader, limit int64) (body []byte, cut bool, err error) {
	body, err = io.ReadAll(io.LimitReader(r, limit+1))
	if int64(len(body)) > limit {
		return body[:limit], true, nil
	}
	return body, false, err
}

var scriptTag = regexp.MustCompile(`(?i)<script[\s>]`)

type contentKind int

const (
	kindUnknown contentKind = iota
	kindHTML
	kindJSON
	kindText
	kindBinary
)

// classifyType sorts a media type into what web_fetch does with it.
func classifyType(mt string) contentKind {
	switch {
	case mt == "":
		return kindUnknown
	case mt == "text/html" || mt == "application/xhtml+xml":
		return kindHTML
	case mt == "application/json" || mt == "text/json" || strings.HasSuffix(mt, "+json"):
		return kindJSON
	case strings.HasPrefix(mt, "text/") || mt == "application/xml" || strings.HasSuffix(mt, "+xml") ||
		mt == "application/javascript" || mt == "application/x-javascript" || mt == "application/x-yaml" ||
		mt == "application/yaml" || mt == "application/toml" || mt == "application/x-ndjson":
		return kindText
	case mt == "application/octet-stream":
		// Servers label everything octet-stream; the caller sniffs the
		// bytes before refusing.
		return kindUnknown
	}
	return kindBinary
}

// sniff guesses a media type from the first bytes (the WHATWG algorithm).
func sniff(body []byte) string {
	mt, _, _ := mime.ParseMediaType(http.DetectContentType(body))
	if mt == "text/plain" {
		trimmed := bytes.TrimSpace(body)
		if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') && json.Valid(trimmed) {
			return "application/json"
		}
	}
	if mt == "application/octet-stream" && utf8.Valid(body) && !bytes.ContainsRune(body, 0) {
		return "text/plain"
	}
	return mt
}

func describeType(mt string) string {
	switch {
	case strings.HasPrefix(mt, "image/"):
		return "an image (" + mt + ")"
	case mt == "application/pdf":
		return "a PDF document"
	case strings.HasPrefix(mt, "video/"), strings.HasPrefix(mt, "audio/"):
		return "media (" + mt + ")"
	}
	return "a binary file (" + mt + ")"
}

// statusError reports an HTTP error status with the start of what the
// server said, which often explains it (a login wall, a rate limit).
func statusError(res fetchResult) error {
	code, next := toolerr.ToolError, "check the URL, or find the information elsewhere"
	switch {
	case res.Status == http.StatusNotFound || res.Status == http.StatusGone:
		code, next = toolerr.NotFound, "check the URL for typos, or search for the page's new address"
	case res.Status == http.StatusUnauthorized || res.Status == http.StatusForbidden:
		next = "the site refuses anonymous access; find a public source instead"
	case res.Status == http.StatusTooManyRequests || res.Status >= 500:
		code, next = toolerr.Unavailable, "try again later, or use another source"
	}
	msg := fmt.Sprintf("%s answered HTTP %d %s.", runes.Shorten(res.FinalURL, runes.Echo), res.Status, http.StatusText(res.Status))
	if excerpt := strings.Join(strings.Fields(runes.Prefix(res.Text, 300)), " "); excerpt != "" {
		msg += " The page says: " + excerpt
	}
	return toolerr.Errorf(code, "%s Next: %s.", msg, next)
}

// explain turns a transport error into a message a model can act on,
// without resolver addresses, internal IPs or other details of our network.
func (t *WebFetch) explain(ctx, pctx context.Context, u *url.URL, err error) error {
	var refused *toolerr.Error
	if errors.Is(err, netguard.ErrRefused) && errors.As(err, &refused) {
		return refused
	}
	host := runes.Shorten(u.Hostname(), runes.Echo)
	if ctx.Err() != nil {
		return ctx.Err() // the registry reports the call's own deadline or cancellation
	}
	if pctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return toolerr.Errorf(toolerr.Timeout, "%s did not answer within %s. Next: try again later, or use another source.", host, t.opts.Timeout)
	}
	var dnsErr *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return toolerr.Errorf(toolerr.NotFound, "The host name %s does not exist. Next: check the URL for typos.", host)
		}
		return toolerr.Errorf(toolerr.Unavailable, "The host name %s could not be resolved right now. Next: try again later.", host)
	case errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &invalid), errors.As(err, &verify):
		return toolerr.Errorf(toolerr.ToolError, "The TLS certificate of %s is not valid (%s); web_fetch does not skip certificate checks. Next: use another source, or an http:// URL only if the site offers one.", host, certReason(err))
	case errors.Is(err, syscall.ECONNREFUSED):
		return toolerr.Errorf(toolerr.Unavailable, "%s refused the connection. Next: check the port in the URL, or try again later.", host)
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return toolerr.Errorf(toolerr.Unavailable, "%s closed the connection before answering. Next: try again later.", host)
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return toolerr.Errorf(toolerr.Unavailable, "%s cannot be reached from here. Next: use another source.", host)
	}
	return toolerr.Errorf(toolerr.Unavailable, "Could not fetch from %s. Next: check the URL, or try again later.", host)
}

func certReason(err error) string {
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknownCA):
		return "signed by an unknown authority"
	case errors.As(err, &hostErr):
		return "issued for another host name"
	case errors.As(err, &invalid):
		if invalid.Reason == x509.Expired {
			return "expired or not yet valid"
		}
		return "rejected"
	}
	return "verification failed"
}

var (
	_ registry.Tool      = (*WebFetch)(nil)
	_ registry.Timeouter = (*WebFetch)(nil)
	_ registry.Ruled     = (*WebFetch)(nil)
)

package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/extract"
	"github.com/countbot/toolsvc/internal/netguard"
	"github.com/countbot/toolsvc/internal/toolerr"
)

// webPages are the pages under internal/extract/testdata, which look like
// the real web: an article inside navigation and ads, a GBK page, a page
// that is empty without JavaScript, JSON, plain text.
const webPages = "../extract/testdata"

func readPage(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(webPages, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// webServer serves the test pages on loopback, plus redirects, a huge body,
// a slow page, error statuses and binary files. hits counts requests per
// path.
type webServer struct {
	*httptest.Server
	hits map[string]*atomic.Int32
	port string
}

func (s *webServer) hit(path string) int32 { return s.hits[path].Load() }

func newWebServer(t testing.TB) *webServer {
	t.Helper()
	s := &webServer{hits: map[string]*atomic.Int32{}}
	mux := http.NewServeMux()
	handle := func(path string, h http.HandlerFunc) {
		s.hits[path] = &atomic.Int32{}
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			s.hits[path].Add(1)
			h(w, r)
		})
	}
	serve := func(path, file, ctype string) {
		body := readPage(t, file)
		handle(path, func(w http.ResponseWriter, r *http.Request) {
			if ctype != "" {
				w.Header().Set("Content-Type", ctype)
			} else {
				w.Header()["Content-Type"] = nil // no header, no sniffing by net/http
			}
			w.Write(body)
		})
	}
	serve("/news/night-buses", "article.html", "text/html; charset=utf-8")
	serve("/gbk", "gbk.html", "text/html")                                     // charset in <meta> only
	serve("/gb2312-header", "gb2312-nometa.html", "text/html; charset=gb2312") // charset in the header only
	serve("/gb2312-none", "gb2312-nometa.html", "text/html")                   // declared nowhere: detected
	serve("/app", "spa.html", "text/html; charset=utf-8")
	serve("/docs/rate-limits", "docs.html", "text/html; charset=utf-8")
	serve("/api/arrivals", "data.json", "application/json")
	serve("/api/untyped", "data.json", "")
	serve("/notes.txt", "notes.txt", "text/plain; charset=utf-8")
	for i := 1; i <= 8; i++ {
		next := fmt.Sprintf("/r/%d", i-1)
		if i == 1 {
			next = "/news/night-buses"
		}
		handle(fmt.Sprintf("/r/%d", i), func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, next, http.StatusFound)
		})
	}
	handle("/huge", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte("<html><head><title>Huge</title></head><body><article>"))
		para := []byte("<p>" + strings.Repeat("All work and no play makes a long page. ", 25) + "</p>\n")
		for n := 0; n < 4<<20; n += len(para) {
			if _, err := w.Write(para); err != nil {
				return
			}
		}
	})
	handle("/slow", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("<html><body><p>Loading"))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // never finishes: the client's deadline must end it
	})
	handle("/stall", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // headers only, then nothing
	})
	handle("/missing", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte("<html><head><title>Not found</title></head><body><h1>Page not found</h1><p>The page you are looking for was moved.</p></body></html>"))
	})
	handle("/busy", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "60")
		http.Error(w, "Service temporarily overloaded", http.StatusServiceUnavailable)
	})
	handle("/logo.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
	})
	handle("/report.pdf", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/pdf")
		w.Write([]byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"))
	})
	handle("/blob", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte{0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xfe, 0})
	})
	handle("/secret", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("internal secret"))
	})
	handle("/to-loopback-ip", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:"+s.port+"/secret", http.StatusFound)
	})
	handle("/to-metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam/security-credentials/", http.StatusFound)
	})
	handle("/to-file", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	_, s.port, _ = net.SplitHostPort(s.Listener.Addr().String())
	return s
}

// stubDNS resolves from a map and never sends a packet.
type stubDNS map[string][]string

func (m stubDNS) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	addrs, ok := m[strings.ToLower(host)]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, Server: "10.9.9.9:53", IsNotFound: true}
	}
	var out []net.IPAddr
	for _, a := range addrs {
		out = append(out, net.IPAddr{IP: net.ParseIP(a)})
	}
	return out, nil
}

var testDNS = stubDNS{
	"allowed.test":             {"127.0.0.1"},
	"intranet.test":            {"10.1.2.3"},
	"metadata.google.internal": {"169.254.169.254"},
	"sneaky.test":              {"127.0.0.1"},
}

func testFetchOpts() WebFetchOptions {
	return WebFetchOptions{MaxBytes: 10 << 20, Timeout: 10 * time.Second, MaxRedirects: 5, MaxConcurrent: 3, MaxURLs: 10}
}

func newFetch(t testing.TB, gopts netguard.Options, opts WebFetchOptions) *WebFetch {
	t.Helper()
	if gopts.Resolver == nil {
		gopts.Resolver = testDNS
	}
	g, err := netguard.New(gopts)
	if err != nil {
		t.Fatal(err)
	}
	return NewWebFetch(g, extract.New(extract.Options{}), opts)
}

// openFetch is web_fetch with the guard opened for loopback, as an
// operator would with TOOLSVC_NET_ALLOW_CIDRS=127.0.0.0/8.
func openFetch(t testing.TB) *WebFetch {
	return newFetch(t, netguard.Options{AllowCIDRs: []string{"127.0.0.0/8"}}, testFetchOpts())
}

func fetchOK(t *testing.T, tool *WebFetch, args string) fetchResult {
	t.Helper()
	out, err := tool.Execute(context.Background(), json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s: %v", args, err)
	}
	var res fetchResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("result is not JSON: %v\n%s", err, out)
	}
	return res
}

func fetchErr(t *testing.T, tool *WebFetch, args, code string, substr ...string) error {
	t.Helper()
	out, err := tool.Execute(context.Background(), json.RawMessage(args))
	if err == nil {
		t.Fatalf("%s: want %s error, got result %.300s", args, code, out)
	}
	var c *toolerr.Error
	if !errors.As(err, &c) || c.Code != code {
		t.Fatalf("%s: want code %s, got %v (%T)", args, code, err, err)
	}
	for _, s := range substr {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: message %q lacks %q", args, err.Error(), s)
		}
	}
	return err
}

func urlArg(u string, extra ...string) string {
	b, _ := json.Marshal(u)
	return `{"url":` + string(b) + strings.Join(extra, "") + `}`
}

// TestWebFetchPages fetches the real-looking pages from loopback and checks
// what comes back: the article without its navigation, ads, cookie banner
// and comments; Chinese pages in GBK/GB2312 decoded however their charset
// is declared; the JavaScript page flagged; JSON pretty-printed; plain text
// passed through.
func TestWebFetchPages(t *testing.T) {
	srv := newWebServer(t)
	tool := openFetch(t)
	cases := []struct {
		name, path, extra string
		extractor         string
		title             string
		want, notWant     []string
		warning           string
	}{
		{
			name: "article text", path: "/news/night-buses", extractor: "trafilatura",
			title: "City council approves night bus network after two-year trial",
			want: []string{"voted 31 to 9", "What changes in March", "- Route N4 is extended to the airport terminal.",
				"N1 Central – Northgate | 312,400 | $2.10", "amendment requiring a review in 2028"},
			notWant: []string{"Subscribe from", "mattresses", "We use cookies", "Most read", "busrider77", "All rights reserved", "gtag", "<p>"},
		},
		{
			name: "article markdown", path: "/news/night-buses", extra: `,"extractMode":"markdown"`, extractor: "trafilatura",
			want: []string{"## What changes in March", "- Routes N1 to N6 run every night of the week.",
				"| N1 Central – Northgate | 312,400", "> The night network costs",
				"[full proposal on the council website](https://example-city.gov/transport/night-network)",
				"(" + srv.URL + "/news/local/night-bus-map)"},
			notWant: []string{"Subscribe from", "mattresses", "Most read"},
		},
		{
			name: "docs markdown keeps code", path: "/docs/rate-limits", extra: `,"extractMode":"markdown"`, extractor: "trafilatura",
			want: []string{"# Rate limits", "| Search", "```\nimport random, time\nimport requests\n\ndef get_with_retry(url, key, attempts=5):\n    for _ in range(attempts):",
				"1. Read `Retry-After`", "[Errors](" + srv.URL + "/api/errors#429)"},
			notWant: []string{"Toggle theme", "Pagination →", "On this page"},
		},
		{
			name: "GBK page, charset in meta", path: "/gbk", extractor: "trafilatura",
			title:   "江南水乡古镇旅游攻略：周庄、同里与乌镇怎么玩",
			want:    []string{"退思园是同里最有名的园林", "第三天：乌镇", "- 门票：周庄一百元"},
			notWant: []string{"特价机票", "热门排行", "版权所有", "\uFFFD"},
		},
		{
			name: "GB2312 page, charset in header only", path: "/gb2312-header", extractor: "trafilatura",
			want: []string{"退思园是同里最有名的园林"}, notWant: []string{"\uFFFD"},
		},
		{
			name: "GB2312 page, charset declared nowhere", path: "/gb2312-none", extra: `,"extractMode":"markdown"`, extractor: "trafilatura",
			want: []string{"## 第一天：周庄", "退思园是同里最有名的园林"}, notWant: []string{"\uFFFD"},
		},
		{
			name: "page empty without JavaScript", path: "/app",
			warning: "almost no text without JavaScript",
		},
		{
			name: "JSON pretty-printed", path: "/api/arrivals", extractor: "json",
			want: []string{"{\n  \"status\": \"ok\",\n  \"route\": \"N4\",", "    {\n      \"bus\": \"N4-17\",\n      \"eta_seconds\": 240,"},
		},
		{
			name: "JSON without a content type", path: "/api/untyped", extractor: "json",
			want: []string{"  \"generated\": \"2026-12-02T01:14:00Z\","},
		},
		{
			name: "plain text passed through", path: "/notes.txt", extractor: "raw",
			want: []string{"Night bus network - changes from 3 March\n\nN1 Central - Northgate: every 30 minutes\n"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := fetchOK(t, tool, urlArg(srv.URL+c.path, c.extra))
			if res.Status != 200 || res.URL != srv.URL+c.path || res.FinalURL != srv.URL+c.path {
				t.Errorf("status %d url %s final %s", res.Status, res.URL, res.FinalURL)
			}
			if c.extractor != "" && res.Extractor != c.extractor {
				t.Errorf("extractor %q, want %q", res.Extractor, c.extractor)
			}
			if c.title != "" && res.Title != c.title {
				t.Errorf("title %q, want %q", res.Title, c.title)
			}
			for _, w := range c.want {
				if !strings.Contains(res.Text, w) {
					t.Errorf("text lacks %q:\n%s", w, res.Text)
				}
			}
			for _, w := range c.notWant {
				if strings.Contains(res.Text, w) {
					t.Errorf("text has boilerplate %q:\n%s", w, res.Text)
				}
			}
			if c.warning != "" && !strings.Contains(res.Warning, c.warning) {
				t.Errorf("warning %q lacks %q", res.Warning, c.warning)
			}
			if c.warning == "" && res.Warning != "" {
				t.Errorf("unexpected warning %q", res.Warning)
			}
			if res.Length != len([]rune(res.Text)) || res.Truncated {
				t.Errorf("length %d for %d characters, truncated %v", res.Length, len([]rune(res.Text)), res.Truncated)
			}
		})
	}
}

// TestWebFetchRedirects follows a chain to its end, and stops a chain
// longer than the limit.
func TestWebFetchRedirects(t *testing.T) {
	srv := newWebServer(t)
	tool := openFetch(t)
	res := fetchOK(t, tool, urlArg(srv.URL+"/r/5"))
	if res.URL != srv.URL+"/r/5" || res.FinalURL != srv.URL+"/news/night-buses" || !strings.Contains(res.Text, "voted 31 to 9") {
		t.Errorf("url %s final %s", res.URL, res.FinalURL)
	}
	fetchErr(t, tool, urlArg(srv.URL+"/r/6"), "policy_denied", "more than 5 redirects")
	if n := srv.hit("/news/night-buses"); n != 1 {
		t.Errorf("article fetched %d times", n)
	}
}

// TestWebFetchBounds checks each bound: response bytes, characters
// returned, time per page.
func TestWebFetchBounds(t *testing.T) {
	srv := newWebServer(t)
	t.Run("huge body cut at MaxBytes", func(t *testing.T) {
		opts := testFetchOpts()
		opts.MaxBytes = 1 << 20
		g, err := netguard.New(netguard.Options{AllowCIDRs: []string{"127.0.0.1"}})
		if err != nil {
			t.Fatal(err)
		}
		// A small analysis budget keeps the test fast under -race; the
		// default (300,000 characters) is measured by the benchmarks.
		tool := NewWebFetch(g, extract.New(extract.Options{MaxChars: 20000}), opts)
		res := fetchOK(t, tool, urlArg(srv.URL+"/huge", `,"maxChars":200000`))
		if !res.Truncated || !strings.Contains(res.Warning, "larger than 1.0 MiB") || !strings.Contains(res.Warning, "only its first part was analysed") {
			t.Errorf("truncated %v warning %q", res.Truncated, res.Warning)
		}
		if !strings.Contains(res.Text, "All work and no play") || res.Length > 25000 || res.Length < 15000 {
			t.Errorf("length %d", res.Length)
		}
	})
	t.Run("maxChars", func(t *testing.T) {
		res := fetchOK(t, openFetch(t), urlArg(srv.URL+"/news/night-buses", `,"maxChars":300`))
		if !res.Truncated || res.Length != 300 || len([]rune(res.Text)) != 300 {
			t.Errorf("truncated %v length %d", res.Truncated, res.Length)
		}
		if !strings.Contains(res.Warning, "Text cut at 300 of") || !strings.Contains(res.Warning, "larger maxChars") {
			t.Errorf("warning %q", res.Warning)
		}
	})
	t.Run("slow server", func(t *testing.T) {
		opts := testFetchOpts()
		opts.Timeout = 300 * time.Millisecond
		tool := newFetch(t, netguard.Options{AllowCIDRs: []string{"127.0.0.1"}}, opts)
		fetchErr(t, tool, urlArg(srv.URL+"/stall"), toolerr.Timeout, "did not answer within 300ms", "Next:")
		// What arrived before the deadline is returned, marked as cut.
		res := fetchOK(t, tool, urlArg(srv.URL+"/slow"))
		if !res.Truncated || !strings.Contains(res.Warning, "did not finish loading within 300ms") || !strings.Contains(res.Text, "Loading") {
			t.Errorf("%+v", res)
		}
	})
}

// TestWebFetchRefusals covers what web_fetch will not read and HTTP errors.
func TestWebFetchRefusals(t *testing.T) {
	srv := newWebServer(t)
	tool := openFetch(t)
	cases := []struct {
		args, code string
		substr     []string
	}{
		{urlArg(srv.URL + "/logo.png"), toolerr.ToolError, []string{"an image (image/png)", "HTML, JSON and plain text"}},
		{urlArg(srv.URL + "/report.pdf"), toolerr.ToolError, []string{"a PDF document"}},
		{urlArg(srv.URL + "/blob"), toolerr.ToolError, []string{"binary data"}},
		{urlArg(srv.URL + "/missing"), toolerr.NotFound, []string{"HTTP 404 Not Found", "Page not found", "Next:"}},
		{urlArg(srv.URL + "/busy"), toolerr.Unavailable, []string{"HTTP 503", "temporarily overloaded", "try again later"}},
		{urlArg("http://no-such-host.test/"), toolerr.NotFound, []string{"no-such-host.test does not exist"}},
		{urlArg("example.com/page"), toolerr.InvalidArguments, []string{"not an absolute URL"}},
		{urlArg("/relative"), toolerr.InvalidArguments, []string{"not an absolute URL"}},
	}
	for _, c := range cases {
		t.Run(c.args, func(t *testing.T) {
			err := fetchErr(t, tool, c.args, c.code, c.substr...)
			if strings.Contains(err.Error(), "10.9.9.9") {
				t.Errorf("message leaks the resolver: %v", err)
			}
		})
	}
	t.Run("untrusted certificate", func(t *testing.T) {
		tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hi")) }))
		defer tls.Close()
		fetchErr(t, tool, urlArg(tls.URL), toolerr.ToolError, "certificate", "unknown authority", "does not skip certificate checks")
	})
}

// TestWebFetchBatch checks order, inline failures and that the other pages
// still come back.
func TestWebFetchBatch(t *testing.T) {
	srv := newWebServer(t)
	tool := openFetch(t)
	urls := []string{
		srv.URL + "/news/night-buses",
		srv.URL + "/missing",
		srv.URL + "/api/arrivals",
		"http://intranet.test/", // resolves to 10.1.2.3, not opened
		srv.URL + "/gbk",
		"ftp://example.com/file",
		srv.URL + "/app",
	}
	b, _ := json.Marshal(map[string]any{"urls": urls, "maxChars": 5000})
	out, err := tool.Execute(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	var res batchResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Batch || res.Count != len(urls) || len(res.Results) != len(urls) {
		t.Fatalf("batch %v count %d results %d", res.Batch, res.Count, len(res.Results))
	}
	for i, r := range res.Results {
		if r.URL != urls[i] {
			t.Errorf("result %d is for %s, want %s", i, r.URL, urls[i])
		}
	}
	wantErr := map[int]string{1: "not_found", 3: "policy_denied", 5: "policy_denied"}
	for i, r := range res.Results {
		if code, bad := wantErr[i]; bad {
			if r.Error == "" || r.Code != code || r.Text != "" {
				t.Errorf("result %d: want inline %s error, got %+v", i, code, r)
			}
			continue
		}
		if r.Error != "" || r.Status != 200 {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	if !strings.Contains(res.Results[0].Text, "voted 31 to 9") || !strings.Contains(res.Results[4].Text, "乌镇") ||
		!strings.Contains(res.Results[2].Text, `"bus": "N4-17"`) || res.Results[6].Warning == "" {
		t.Errorf("batch texts wrong:\n%s", out)
	}
	if strings.Contains(out, "10.1.2.3") {
		t.Error("batch result reveals the internal address a name resolved to")
	}
}

// TestWebFetchAttacks runs with the guard closed (the default). Literal
// loopback, metadata and private addresses in any spelling, names that
// resolve to them and redirects to them are refused with policy_denied. The
// only server is on loopback and must see no request but the first hop of
// the redirect cases; the other addresses are refused before any packet.
func TestWebFetchAttacks(t *testing.T) {
	srv := newWebServer(t)
	tool := newFetch(t, netguard.Options{AllowHosts: []string{"allowed.test"}}, testFetchOpts())
	p := srv.port
	attacks := []struct{ url, substr string }{
		{"http://127.0.0.1:" + p + "/secret", "loopback"},
		{"http://localhost:" + p + "/secret", ""}, // real resolver is not used: stub says NXDOMAIN or loopback
		{"http://[::1]:" + p + "/secret", "loopback"},
		{"http://169.254.169.254/latest/meta-data/", "metadata"},
		{"http://[::ffff:a9fe:a9fe]/latest/meta-data/", "metadata"},
		{"http://[::ffff:169.254.169.254]/", "metadata"},
		{"http://[fd00:ec2::254]/latest/meta-data/", "metadata"},
		{"http://100.100.100.200/latest/meta-data/", "metadata"},
		{"http://metadata.google.internal/computeMetadata/v1/", "metadata"},
		{"http://10.0.0.1/", "private"},
		{"http://172.16.5.4:8080/", "private"},
		{"http://192.168.1.1/admin", "private"},
		{"http://100.64.0.1/", "carrier-grade NAT"},
		{"http://0.0.0.0:" + p + "/secret", "this network"},
		{"http://[fe80::1]/", "link-local"},
		{"http://[fc00::1]/", "unique local"},
		{"http://[64:ff9b::a9fe:a9fe]/", "metadata"},
		{"http://[2002:7f00:1::]/", "6to4"},
		{"http://2130706433:" + p + "/secret", "unusual notation"},
		{"http://0177.0.0.1:" + p + "/secret", "unusual notation"},
		{"http://0x7f.1:" + p + "/secret", "unusual notation"},
		{"http://127.1:" + p + "/secret", "unusual notation"},
		{"http://0xa9fea9fe/", "unusual notation"},
		{"http://intranet.test/", "intranet.test resolves to a non-public address"},
		{"http://sneaky.test:" + p + "/secret", "sneaky.test resolves to a non-public address (loopback"},
		{"file:///etc/passwd", "scheme"},
		{"gopher://127.0.0.1:6379/_INFO", "scheme"},
		{"http://allowed.test:" + p + "/to-loopback-ip", "Redirect to http://127.0.0.1:" + p + "/secret refused"},
		{"http://allowed.test:" + p + "/to-metadata", "Redirect to http://169.254.169.254/latest/meta-data/iam/security-credentials/ refused"},
		{"http://allowed.test:" + p + "/to-file", "scheme"},
	}
	for _, a := range attacks {
		t.Run(a.url, func(t *testing.T) {
			out, err := tool.Execute(context.Background(), json.RawMessage(urlArg(a.url)))
			if err == nil {
				t.Fatalf("fetched: %.200s", out)
			}
			var c *toolerr.Error
			if strings.Contains(a.url, "localhost") {
				// The stub knows no "localhost": refused or not found,
				// never fetched.
				if !errors.As(err, &c) {
					t.Fatalf("uncoded error %v", err)
				}
				return
			}
			if !errors.As(err, &c) || c.Code != toolerr.PolicyDenied {
				t.Fatalf("want policy_denied, got %v", err)
			}
			if !strings.Contains(err.Error(), a.substr) || !strings.Contains(err.Error(), "Next:") {
				t.Errorf("message %q lacks %q", err.Error(), a.substr)
			}
			if strings.Contains(err.Error(), "10.1.2.3") {
				t.Errorf("message reveals the resolved address: %v", err)
			}
		})
	}
	if n := srv.hit("/secret"); n != 0 {
		t.Errorf("the internal page was reached %d times", n)
	}
	if n := srv.hit("/to-loopback-ip"); n != 1 {
		t.Errorf("the allowed first hop was reached %d times, want 1", n)
	}
}

// TestWebFetchSchema checks that the declared parameters are CountBot's
// web_fetch parameters, so that agents written for it call it unchanged.
func TestWebFetchSchema(t *testing.T) {
	tool := openFetch(t)
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Additional *bool                      `json:"additionalProperties"`
	}
	if err := json.Unmarshal(tool.Parameters(), &s); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"url", "urls", "extractMode", "maxChars"} {
		if _, ok := s.Properties[k]; !ok {
			t.Errorf("no %s parameter", k)
		}
	}
	if s.Additional == nil || *s.Additional {
		t.Error("additionalProperties is not false")
	}
	if !bytes.Contains(tool.Parameters(), []byte(`"maxItems":10`)) {
		t.Error("urls not bounded by MaxURLs")
	}
	if tool.Timeout() < 30*time.Second {
		t.Errorf("timeout %v too short for a batch", tool.Timeout())
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/countbot/toolsvc/internal/registry"
)

// origin is a web site on loopback serving the pages of
// internal/extract/testdata (an article in navigation and ads, a GBK page, a
// page empty without JavaScript, JSON), a redirect chain, a huge body, a
// slow page, and a /secret that no test may reach.
type origin struct {
	*httptest.Server
	port   string
	secret atomic.Int32
	hops   atomic.Int32
}

func newOrigin(t *testing.T) *origin {
	t.Helper()
	o := &origin{}
	mux := http.NewServeMux()
	serve := func(path, file, ctype string) {
		body, err := os.ReadFile(filepath.Join("..", "..", "internal", "extract", "testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ctype)
			w.Write(body)
		})
	}
	serve("/news/night-buses", "article.html", "text/html; charset=utf-8")
	serve("/travel/guzhen", "gbk.html", "text/html")
	serve("/app", "spa.html", "text/html")
	serve("/api/arrivals", "data.json", "application/json; charset=utf-8")
	serve("/notes.txt", "notes.txt", "text/plain")
	mux.HandleFunc("/r/{n}", func(w http.ResponseWriter, r *http.Request) {
		o.hops.Add(1)
		var n int
		fmt.Sscan(r.PathValue("n"), &n)
		next := fmt.Sprintf("/r/%d", n-1)
		if n <= 1 {
			next = "/news/night-buses"
		}
		http.Redirect(w, r, next, http.StatusMovedPermanently)
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		// A short article followed by megabytes of inline state, as single
		// page apps ship it.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<html><head><title>Big state</title></head><body><article><h1>Big state</h1>")
		for i := 0; i < 6; i++ {
			fmt.Fprintf(w, "<p>Paragraph %d of a real article that comes before a very large block of inline data in the page.</p>", i)
		}
		fmt.Fprint(w, "</article><script>window.__STATE__=\"")
		chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096)
		for n := 0; n < 4<<20; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		fmt.Fprint(w, "\"</script></body></html>")
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("/photo.jpg", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/jpeg")
		w.Write([]byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00"))
	})
	mux.HandleFunc("/secret", func(w http.ResponseWriter, r *http.Request) {
		o.secret.Add(1)
		w.Write([]byte("root:x:0:0 internal secret"))
	})
	mux.HandleFunc("/to-ip", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:"+o.port+"/secret", http.StatusFound)
	})
	mux.HandleFunc("/to-v6", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://[::1]:"+o.port+"/secret", http.StatusFound)
	})
	mux.HandleFunc("/to-decimal", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://2130706433:"+o.port+"/secret", http.StatusFound)
	})
	mux.HandleFunc("/to-metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	o.Server = httptest.NewServer(mux)
	t.Cleanup(o.Close)
	_, o.port, _ = net.SplitHostPort(o.Listener.Addr().String())
	return o
}

type fetched struct {
	URL, FinalURL, Title, Extractor, Text, Warning, Error, Code string
	Status, Length                                              int
	Truncated                                                   bool
}

func decodeFetch(t *testing.T, res registry.Result) fetched {
	t.Helper()
	var f fetched
	if err := json.Unmarshal([]byte(mustSucceed(t, res)), &f); err != nil {
		t.Fatalf("result is not JSON: %v\n%s", err, res.Result)
	}
	return f
}

// TestWebFetchE2E fetches real-looking pages through the running service,
// with the guard opened for loopback as an operator would
// (TOOLSVC_NET_ALLOW_CIDRS=127.0.0.0/8).
func TestWebFetchE2E(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	s := startServer(t, map[string]string{
		"NET_ALLOW_CIDRS": "127.0.0.0/8",
		"FETCH_MAX_BYTES": "1048576",
		"FETCH_TIMEOUT":   "5s", // only /slow takes it; the rest must fit on a loaded machine
	})

	t.Run("article", func(t *testing.T) {
		f := decodeFetch(t, s.invoke(t, "web_fetch", map[string]any{"url": o.URL + "/news/night-buses"}))
		if f.Status != 200 || f.Extractor != "trafilatura" || f.Title != "City council approves night bus network after two-year trial" ||
			!strings.Contains(f.Text, "voted 31 to 9") || strings.Contains(f.Text, "Subscribe") || strings.Contains(f.Text, "mattresses") ||
			f.Length != len([]rune(f.Text)) || f.Truncated {
			t.Errorf("%+v", f)
		}
	})
	t.Run("article as markdown", func(t *testing.T) {
		f := decodeFetch(t, s.invoke(t, "web_fetch", map[string]any{"url": o.URL + "/news/night-buses", "extractMode": "markdown"}))
		for _, w := range []string{"## How the trial went", "| N4 Central – Airport", "- Route N4 is extended", "[full proposal on the council website](https://example-city.gov/transport/night-network)"} {
			if !strings.Contains(f.Text, w) {
				t.Errorf("lacks %q:\n%s", w, f.Text)
			}
		}
	})
	t.Run("GBK page", func(t *testing.T) {
		f := decodeFetch(t, s.invoke(t, "web_fetch", map[string]any{"url": o.URL + "/travel/guzhen"}))
		if !strings.Contains(f.Title, "江南水乡古镇旅游攻略") || !strings.Contains(f.Text, "退思园是同里最有名的园林") || strings.Contains(f.Text, "\uFFFD") {
			t.Errorf("%+v", f)
		}
	})
	t.Run("page empty without JavaScript", func(t *testing.T) {
		f := decodeFetch(t, s.invoke(t, "web_fetch", map[string]any{"url": o.URL + "/app"}))
		if !strings.Contains(f.Warning, "JavaScript") || !strings.Contains(f.Warning, "screenshot") {
			t.Errorf("warning %q", f.Warning)
		}
	})
	t.Run("JSON", func(t *testing.T) {
		f := decodeFetch(t, s.invoke(t, "web_fetch", map[string]any{"url": o.URL + "/api/arrivals"}))
		if f.Extractor != "json" || !strings.Contains(f.Text, "\n  \"arrivals\": [\n    {\n      \"bus\": \"N4-17\",") {
			t.Errorf("%+v", f)
		}
	})
	t.Run("redirect chain", func(t *testing.T) {
		f := decodeFetch(t, s.invoke(t, "web_fetch", map[string]any{"url": o.URL + "/r/4"}))
		if f.URL != o.URL+"/r/4" || f.FinalURL != o.URL+"/news/night-buses" || !strings.Contains(f.Text, "voted 31 to 9") {
			t.Errorf("%+v", f)
		}
		res := s.invoke(t, "web_fetch", map[string]any{"url": o.URL + "/r/9"})
		mustFail(t, res, "policy_denied", "more than 5 redirects")
	})
	t.Run("huge body", func(t *testing.T) {
		f := decodeFetch(t, s.invoke(t, "web_fetch", map[string]any{"url": o.URL + "/huge"}))
		if !f.Truncated || !strings.Contains(f.Warning, "larger than 1.0 MiB") || !strings.Contains(f.Text, "Paragraph 5 of a real article") {
			t.Errorf("%+v", f)
		}
	})
	t.Run("slow server", func(t *testing.T) {
		mustFail(t, s.invoke(t, "web_fetch", map[string]any{"url": o.URL + "/slow"}), "timeout", "did not answer within 5s", "Next:")
	})
	t.Run("image refused", func(t *testing.T) {
		mustFail(t, s.invoke(t, "web_fetch", map[string]any{"url": o.URL + "/photo.jpg"}), "tool_error", "an image (image/jpeg)")
	})
	t.Run("batch", func(t *testing.T) {
		urls := []string{o.URL + "/news/night-buses", o.URL + "/photo.jpg", o.URL + "/notes.txt", "http://169.254.169.254/latest/meta-data/", o.URL + "/travel/guzhen"}
		out := mustSucceed(t, s.invoke(t, "web_fetch", map[string]any{"urls": urls, "maxChars": 1000}))
		var b struct {
			Batch   bool
			Count   int
			Results []fetched
		}
		if err := json.Unmarshal([]byte(out), &b); err != nil {
			t.Fatal(err)
		}
		if !b.Batch || b.Count != 5 || len(b.Results) != 5 {
			t.Fatalf("%s", out)
		}
		for i, r := range b.Results {
			if r.URL != urls[i] {
				t.Errorf("result %d for %s", i, r.URL)
			}
		}
		if b.Results[1].Code != "tool_error" || b.Results[3].Code != "policy_denied" || !strings.Contains(b.Results[3].Error, "metadata") {
			t.Errorf("inline errors wrong: %s", out)
		}
		if !b.Results[0].Truncated || b.Results[0].Length != 1000 || !strings.Contains(b.Results[2].Text, "N4 Central - Airport") || !strings.Contains(b.Results[4].Text, "乌镇") {
			t.Errorf("pages wrong: %s", out)
		}
	})
	t.Run("arguments checked by the schema", func(t *testing.T) {
		mustFail(t, s.invoke(t, "web_fetch", map[string]any{"url": o.URL, "maxChars": 10}), "invalid_arguments")
		mustFail(t, s.invoke(t, "web_fetch", map[string]any{"url": o.URL, "extractMode": "pdf"}), "invalid_arguments")
		mustFail(t, s.invoke(t, "web_fetch", map[string]any{"url": o.URL, "headers": map[string]string{"Cookie": "x"}}), "invalid_arguments")
		many := make([]string, 11)
		for i := range many {
			many[i] = o.URL + "/notes.txt"
		}
		mustFail(t, s.invoke(t, "web_fetch", map[string]any{"urls": many}), "invalid_arguments")
		mustFail(t, s.invoke(t, "web_fetch", map[string]any{}), "invalid_arguments", "missing required url or urls (exactly one of them)")
	})
	if n := o.secret.Load(); n != 0 {
		t.Errorf("/secret reached %d times", n)
	}
}

// TestWebFetchE2EGuardClosed attacks the service with the default
// configuration: loopback, metadata and private addresses by literal IP, odd
// spellings and by a name (localhost) must all be refused. Only loopback is
// ever connected to; the others are refused before any packet.
func TestWebFetchE2EGuardClosed(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	s := startServer(t, nil)
	p := o.port
	attacks := []struct{ url, want string }{
		{o.URL + "/secret", "loopback"},
		{"http://localhost:" + p + "/secret", "localhost resolves to a non-public address"},
		{"http://127.0.0.1.:" + p + "/secret", "loopback"},
		{"http://[::1]:" + p + "/secret", "loopback"},
		{"http://[::ffff:127.0.0.1]:" + p + "/secret", "loopback"},
		{"http://0.0.0.0:" + p + "/secret", "this network"},
		{"http://2130706433:" + p + "/secret", "unusual notation"},
		{"http://0177.0.0.1:" + p + "/secret", "unusual notation"},
		{"http://0x7f.1:" + p + "/secret", "unusual notation"},
		{"http://127.1:" + p + "/secret", "unusual notation"},
		{"http://169.254.169.254/latest/meta-data/iam/security-credentials/", "metadata"},
		{"http://[::ffff:a9fe:a9fe]/latest/meta-data/", "metadata"},
		{"http://[fd00:ec2::254]/latest/meta-data/", "metadata"},
		{"http://100.100.100.200/latest/meta-data/", "metadata"},
		{"http://10.0.0.1/", "private"},
		{"http://172.20.0.1/", "private"},
		{"http://192.168.0.1/", "private"},
		{"http://100.64.1.1/", "carrier-grade NAT"},
		{"http://[fe80::1]/", "link-local"},
		{"http://[64:ff9b::a00:1]/", "NAT64"},
		{"http://[2002:a00:1::]/", "6to4"},
		{"file:///etc/passwd", "scheme"},
		{"gopher://127.0.0.1:" + p + "/_GET", "scheme"},
	}
	for _, a := range attacks {
		t.Run(a.url, func(t *testing.T) {
			wants := []string{a.want, "Next:"}
			if a.want != "scheme" {
				wants = append(wants, "TOOLSVC_NET_ALLOW_CIDRS")
			}
			msg := mustFail(t, s.invoke(t, "web_fetch", map[string]any{"url": a.url}), "policy_denied", wants...)
			if strings.Contains(msg, "root:x") {
				t.Errorf("leaked: %s", msg)
			}
		})
	}
	if n := o.secret.Load(); n != 0 {
		t.Errorf("/secret reached %d times", n)
	}
}

// TestWebFetchE2ERedirectToInternal opens only the host name "localhost"
// (TOOLSVC_NET_ALLOW_HOSTS): the first hop is fetched, a redirect from it to
// a loopback address by IP, by IPv6, by decimal spelling or to the metadata
// endpoint is refused.
func TestWebFetchE2ERedirectToInternal(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	s := startServer(t, map[string]string{"NET_ALLOW_HOSTS": "localhost"})
	base := "http://localhost:" + o.port
	f := decodeFetch(t, s.invoke(t, "web_fetch", map[string]any{"url": base + "/news/night-buses"}))
	if !strings.Contains(f.Text, "voted 31 to 9") {
		t.Fatalf("the allowed host was not fetched: %+v", f)
	}
	for path, want := range map[string]string{
		"/to-ip":       "Redirect to http://127.0.0.1:" + o.port + "/secret refused",
		"/to-v6":       "Redirect to http://[::1]:" + o.port + "/secret refused",
		"/to-decimal":  "unusual notation",
		"/to-metadata": "metadata",
	} {
		t.Run(path, func(t *testing.T) {
			mustFail(t, s.invoke(t, "web_fetch", map[string]any{"url": base + path}), "policy_denied", want)
		})
	}
	if n := o.secret.Load(); n != 0 {
		t.Errorf("/secret reached %d times", n)
	}
}

// TestWebFetchE2EBadAllowList: a bad CIDR or host pattern stops start-up
// with an error naming the variable.
func TestWebFetchE2EBadAllowList(t *testing.T) {
	t.Parallel()
	for name, env := range map[string]map[string]string{
		"TOOLSVC_NET_ALLOW_CIDRS":      {"NET_ALLOW_CIDRS": "10.0.0.0/8,10.1.0.0/33"},
		"TOOLSVC_NET_ALLOW_HOSTS":      {"NET_ALLOW_HOSTS": "http://wiki.corp/"},
		"TOOLSVC_FETCH_MAX_BYTES":      {"FETCH_MAX_BYTES": "0"},
		"TOOLSVC_FETCH_MAX_REDIRECTS":  {"FETCH_MAX_REDIRECTS": "-1"},
		"TOOLSVC_FETCH_MAX_CONCURRENT": {"FETCH_MAX_CONCURRENT": "0"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := startError(t, env)
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("run() = %v, want an error naming %s", err, name)
			}
		})
	}
}

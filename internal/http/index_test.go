package http

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

func getIndex(t *testing.T, url string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// The index lists the doors this handler serves, and only those: a door
// that depends on the setup (metrics, routes added by Routes) is there
// exactly when it answers.
func TestIndexListsTheDoorsThatAnswer(t *testing.T) {
	always := map[string]string{
		"tools": "/tools", "tool": "/tools/{name}", "invoke": "/tools/{name}/invoke", "mcp": "/mcp",
		"openapi": "/openapi.json", "health": "/healthz", "ready": "/readyz", "docs": "/docs",
	}
	for _, tc := range []struct {
		name  string
		opts  Options
		extra map[string]string
	}{
		{"bare", Options{}, nil},
		{"metrics and agents", Options{
			Metrics: http.NotFoundHandler(),
			Routes: func(r chi.Router) {
				r.Get("/agents", func(http.ResponseWriter, *http.Request) {})
				r.Get("/skills", func(http.ResponseWriter, *http.Request) {})
			},
			Version: "v1.2.3",
		}, map[string]string{"metrics": "/metrics", "agents": "/agents", "skills": "/skills"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := newTestServer(t, tc.opts)
			for _, path := range []string{"/", "/docs"} {
				resp, body := getIndex(t, srv.URL+path, nil)
				if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
					t.Fatalf("GET %s: %d %s %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
				}
				var got indexBody
				if err := json.Unmarshal([]byte(body), &got); err != nil {
					t.Fatalf("GET %s: %v: %s", path, err, body)
				}
				want := map[string]string{}
				for k, v := range always {
					want[k] = v
				}
				for k, v := range tc.extra {
					want[k] = v
				}
				if len(got.Doors) != len(want) {
					t.Errorf("GET %s: doors %v, want %v", path, got.Doors, want)
				}
				for k, v := range want {
					if got.Doors[k] != v {
						t.Errorf("GET %s: doors[%q] = %q, want %q", path, k, got.Doors[k], v)
					}
				}
				if got.Name != "toolsvc" || got.Version != tc.opts.Version || got.Docs != DocsURL {
					t.Errorf("GET %s: %+v", path, got)
				}
			}
		})
	}
}

// A browser that asks for HTML gets a page with the same doors, which runs
// no script and loads nothing.
func TestIndexIsHTMLForBrowsers(t *testing.T) {
	srv, _ := newTestServer(t, Options{Version: "v<1>"})
	resp, body := getIndex(t, srv.URL+"/", map[string]string{
		"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
	})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if !strings.Contains(resp.Header.Get("Vary"), "Accept") {
		t.Errorf("Vary %q", resp.Header.Get("Vary"))
	}
	for _, want := range []string{`<a href="/tools">/tools</a>`, "/tools/{name}/invoke", `<a href="/healthz">`, DocsURL, "v&lt;1&gt;"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<script") || strings.Contains(body, "v<1>") {
		t.Errorf("page has a script or an unescaped version:\n%s", body)
	}
}

// The index is a door like the others: it needs a key when keys are set,
// and the browser guard refuses pages that are not invited.
func TestIndexIsBehindKeysAndGuard(t *testing.T) {
	srv, _ := newTestServer(t, Options{Keys: []Key{{Name: "alice", Secret: "alice-secret-0123456789"}}})
	for _, tc := range []struct {
		name   string
		path   string
		header map[string]string
		want   int
		code   string
	}{
		{"no key", "/", nil, http.StatusUnauthorized, "unauthorized"},
		{"no key, docs", "/docs", nil, http.StatusUnauthorized, "unauthorized"},
		{"wrong key", "/", map[string]string{"Authorization": "Bearer nope-nope-nope-nope"}, http.StatusUnauthorized, "unauthorized"},
		{"key", "/", map[string]string{"Authorization": "Bearer alice-secret-0123456789"}, http.StatusOK, ""},
		{"key, browser", "/docs", map[string]string{"Authorization": "Bearer alice-secret-0123456789", "Accept": "text/html"}, http.StatusOK, ""},
		{"another site's page", "/", map[string]string{"Authorization": "Bearer alice-secret-0123456789", "Origin": "https://evil.example"}, http.StatusForbidden, "origin_not_allowed"},
		{"rebound host", "/", map[string]string{"Authorization": "Bearer alice-secret-0123456789", "Host": "evil.example"}, http.StatusForbidden, "host_not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				if k == "Host" {
					req.Host = v
					continue
				}
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("%d, want %d: %s", resp.StatusCode, tc.want, body)
			}
			if tc.code == "" {
				if strings.Contains(string(body), "alice-secret") {
					t.Errorf("the index shows the key: %s", body)
				}
				return
			}
			var e struct{ Error struct{ Code string } }
			if json.Unmarshal(body, &e) != nil || e.Error.Code != tc.code {
				t.Errorf("body %s, want code %s", body, tc.code)
			}
		})
	}
}

// TestDocsPage: a browser gets the API page at /docs without a key, with
// its files from the binary and a policy that keeps it to its own origin;
// other clients get the index, behind the key.
func TestDocsPage(t *testing.T) {
	srv, _ := newTestServer(t, Options{Keys: []Key{{Name: "alice", Secret: "alice-secret-0123456789"}}})
	resp, body := getIndex(t, srv.URL+"/docs", map[string]string{"Accept": "text/html"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "swagger-ui-bundle.js") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "connect-src 'self'") {
		t.Errorf("GET /docs as a browser: %d %s %s", resp.StatusCode, resp.Header, body)
	}
	for _, f := range []string{"swagger-ui-bundle.js", "swagger-ui.css", "docs.js", "docs.css"} {
		if resp, _ := getIndex(t, srv.URL+"/docs/assets/"+f, nil); resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") == "" {
			t.Errorf("%s: %d", f, resp.StatusCode)
		}
	}
	for _, f := range []string{"LICENSE", "VERSION", "../docspage.go", "nope.js"} {
		if resp, _ := getIndex(t, srv.URL+"/docs/assets/"+f, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", f, resp.StatusCode)
		}
	}
	if resp, _ := getIndex(t, srv.URL+"/docs", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /docs as JSON without the key: %d", resp.StatusCode)
	}
}

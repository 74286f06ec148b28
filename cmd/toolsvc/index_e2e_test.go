package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// GET / is the service's index: behind the key, it names every door this
// process answers, and each door it names (those that take a GET) answers
// with the key. A browser gets the same as a page.
func TestIndexE2E(t *testing.T) {
	t.Parallel()
	const key = "index-e2e-key-0123456789abcdef"
	for _, tc := range []struct {
		name    string
		env     map[string]string
		present []string
		absent  []string
	}{
		{"no model", map[string]string{"API_KEYS": key},
			[]string{"tools", "tool", "invoke", "mcp", "openapi", "skills", "metrics", "health", "ready", "approvals"}, []string{"agents"}},
		{"with a model", llmEnv("http://127.0.0.1:9/v1", map[string]string{"API_KEYS": key}),
			[]string{"agents"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startConfig(t, tc.env)
			for _, path := range []string{"/", "/docs"} {
				resp, body := s.do(t, http.MethodGet, path, nil, nil)
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("GET %s without a key: %d %s", path, resp.StatusCode, body)
				}
			}
			s.Key = key
			resp, body := s.do(t, http.MethodGet, "/", nil, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /: %d %s", resp.StatusCode, body)
			}
			var idx struct {
				Name, Version, Docs string
				Doors               map[string]string
			}
			if err := json.Unmarshal(body, &idx); err != nil {
				t.Fatalf("GET /: %v: %s", err, body)
			}
			if idx.Name != "toolsvc" || idx.Version == "" || !strings.HasPrefix(idx.Docs, "https://") {
				t.Errorf("GET /: %s", body)
			}
			for _, d := range tc.present {
				if idx.Doors[d] == "" {
					t.Errorf("GET / lacks the door %s: %s", d, body)
				}
			}
			for _, d := range tc.absent {
				if idx.Doors[d] != "" {
					t.Errorf("GET / names %s, which this service does not serve: %s", d, body)
				}
			}
			for name, path := range idx.Doors {
				if strings.Contains(path, "{") || name == "mcp" || name == "invoke" {
					continue
				}
				want := http.StatusOK
				if name == "approvals" {
					// Served, but to the keys that may decide approvals only.
					want = http.StatusForbidden
				}
				if resp, body := s.do(t, http.MethodGet, path, nil, nil); resp.StatusCode != want {
					t.Errorf("door %s: GET %s: %d %.200s, want %d", name, path, resp.StatusCode, body, want)
				}
			}
			if _, docs := s.do(t, http.MethodGet, "/docs", nil, nil); string(docs) != string(body) {
				t.Errorf("GET /docs differs from GET /:\n%s\n%s", docs, body)
			}
			resp, page := s.do(t, http.MethodGet, "/", nil, map[string]string{"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				t.Fatalf("GET / as a browser: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			assertContains(t, "the index page", string(page), `<a href="/tools">`, "/tools/{name}/invoke", idx.Docs)
		})
	}
}

package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
)

// TestMethodNotAllowedSaysAllow: a 405 names the methods the path has, as
// HTTP asks, for the open routes and for those behind the key.
func TestMethodNotAllowedSaysAllow(t *testing.T) {
	t.Parallel()
	const key = "k-0123456789abcdef"
	s := startServer(t, map[string]string{"API_KEYS": key})
	s.Key = key
	tests := []struct{ method, path, allow string }{
		{"POST", "/healthz", "GET, HEAD"},
		{"DELETE", "/readyz", "GET, HEAD"},
		{"POST", "/tools", "GET, HEAD"},
		{"PUT", "/tools/read_file", "GET, HEAD"},
		{"GET", "/tools/read_file/invoke", "POST"},
		{"HEAD", "/tools/read_file/invoke", "POST"},
		{"PATCH", "/skills", "GET, HEAD"},
		{"GET", "/mcp", "POST"},
		{"DELETE", "/mcp", "POST"},
		{"POST", "/metrics", "GET, HEAD"},
		{"POST", "/openapi.json", "GET, HEAD"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			resp, body := s.do(t, tt.method, tt.path, nil, nil)
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Fatalf("%d %s; want 405", resp.StatusCode, body)
			}
			if got := resp.Header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow %q; want %q", got, tt.allow)
			}
			if tt.method == "HEAD" {
				return
			}
			var e struct{ Error struct{ Code string } }
			if json.Unmarshal(body, &e) != nil || e.Error.Code != "method_not_allowed" {
				t.Errorf("body %s; want the method_not_allowed error", body)
			}
		})
	}
}

// TestHeadOnGetRoutes: HEAD answers every GET route with GET's status and
// headers and no body, and still needs the key where GET does.
func TestHeadOnGetRoutes(t *testing.T) {
	t.Parallel()
	const key = "k-0123456789abcdef"
	s := startServer(t, map[string]string{"API_KEYS": key})
	s.Key = key
	for _, path := range []string{"/healthz", "/readyz", "/tools", "/tools/read_file", "/tools/nope", "/skills", "/openapi.json", "/tools?format=gemini"} {
		t.Run(path, func(t *testing.T) {
			get, getBody := s.do(t, "GET", path, nil, nil)
			head, headBody := s.do(t, "HEAD", path, nil, nil)
			if head.StatusCode != get.StatusCode {
				t.Errorf("HEAD %d; GET %d", head.StatusCode, get.StatusCode)
			}
			if len(headBody) != 0 {
				t.Errorf("HEAD returned a body: %s", headBody)
			}
			if got, want := head.Header.Get("Content-Length"), strconv.Itoa(len(getBody)); got != want {
				t.Errorf("HEAD Content-Length %q; GET's body has %s bytes", got, want)
			}
			if got, want := head.Header.Get("Content-Type"), get.Header.Get("Content-Type"); got != want {
				t.Errorf("HEAD Content-Type %q; GET's is %q", got, want)
			}
		})
	}
	s.Key = ""
	if resp, _ := s.do(t, "HEAD", "/tools", nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("HEAD /tools without a key: %d; want 401", resp.StatusCode)
	}
	if resp, _ := s.do(t, "HEAD", "/healthz", nil, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /healthz without a key: %d; want 200", resp.StatusCode)
	}
	if resp, _ := s.do(t, "HEAD", "/nowhere", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("HEAD /nowhere: %d; want 404", resp.StatusCode)
	}
}

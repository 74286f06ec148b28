package http

import (
	"net/http"
	"strings"
	"testing"
)

// GET / with keys set: a browser that sends no key gets the page that
// points at /docs, and only that; every other request goes through the
// keys to the index.
func TestFrontPageWithKeys(t *testing.T) {
	const secret = "alice-secret-0123456789"
	srv, _ := newTestServer(t, Options{Version: "v<2>", Keys: []Key{{Name: "alice", Secret: secret}}})
	const browser = "text/html,application/xhtml+xml,*/*;q=0.8"
	for _, tc := range []struct {
		name   string
		header map[string]string
		status int
		has    []string
	}{
		{"a browser without a key", map[string]string{"Accept": browser}, http.StatusOK,
			[]string{`<a href="/docs">/docs</a>`, "v&lt;2&gt;", "needs the key", DocsURL}},
		{"a browser with the key", map[string]string{"Accept": browser, "Authorization": "Bearer " + secret}, http.StatusOK,
			[]string{`<a href="/tools">/tools</a>`, "/tools/{name}/invoke"}},
		{"a browser with a wrong key", map[string]string{"Accept": browser, "Authorization": "Bearer nope-nope-nope-nope"}, http.StatusUnauthorized,
			[]string{`"unauthorized"`}},
		{"a client without a key", nil, http.StatusUnauthorized, []string{`"unauthorized"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := getIndex(t, srv.URL+"/", tc.header)
			if resp.StatusCode != tc.status {
				t.Fatalf("%d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			for _, want := range tc.has {
				if !strings.Contains(body, want) {
					t.Errorf("the answer lacks %q:\n%s", want, body)
				}
			}
			if tc.name == "a browser without a key" {
				for _, leak := range []string{"/tools/{name}/invoke", "/openapi.json", "<script", "v<2>"} {
					if strings.Contains(body, leak) {
						t.Errorf("the page without a key holds %q:\n%s", leak, body)
					}
				}
			}
			// Each name once: the answer differs with both.
			if vary := resp.Header.Values("Vary"); strings.Join(vary, ", ") != "Accept, Authorization" {
				t.Errorf("Vary %q", vary)
			}
		})
	}
}

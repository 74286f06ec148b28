package main

import (
	"strings"
	"testing"
)

// TestLogBatches: with TOOLSVC_LOG_FLUSH_INTERVAL set, the access log's
// info lines wait to be written together, a warning is written at once
// after the lines before it, and shutdown writes what waits. The listening
// line does not wait. The service runs as a process, its log on a pipe.
func TestLogBatches(t *testing.T) {
	// The longest interval allowed: nothing but the rules above can write
	// the lines within the test.
	s := startServer(t, map[string]string{"LOG_FLUSH_INTERVAL": "10s"}, asProcess())
	if !strings.Contains(s.Logs(), `"message":"listening"`) {
		t.Fatalf("no listening line:\n%s", s.Logs())
	}

	resp, _ := s.do(t, "GET", "/tools", nil, nil)
	first := resp.Header.Get("X-Request-Id")
	if resp.StatusCode != 200 || first == "" {
		t.Fatalf("GET /tools: %d, request ID %q", resp.StatusCode, first)
	}
	if strings.Contains(s.Logs(), first) {
		t.Errorf("the access line was written at once, not in a batch:\n%s", s.Logs())
	}

	// A page's request is refused with a warning, which takes the waiting
	// line out with it, in order.
	resp, _ = s.do(t, "GET", "/tools", nil, map[string]string{"Origin": "https://evil.example"})
	refused := resp.Header.Get("X-Request-Id")
	if resp.StatusCode != 403 {
		t.Fatalf("GET /tools from a page: %d, want 403", resp.StatusCode)
	}
	waitLog(t, s, "browser request refused", 1)
	logs := s.Logs()
	accessLine := strings.Index(logs, `"request_id":"`+first+`"`)
	warning := strings.Index(logs, "browser request refused")
	if accessLine < 0 || accessLine > warning {
		t.Errorf("the waiting access line is not before the warning:\n%s", logs)
	}
	if strings.Contains(logs, `"request_id":"`+refused+`","method"`) {
		t.Errorf("the refused request's access line (info) did not wait:\n%s", logs)
	}

	s.Stop(t)
	logs = s.Logs()
	for _, want := range []string{`"request_id":"` + refused + `","method":"GET","path":"/tools","status":403`, `"message":"stopped"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("after shutdown the log lacks %s:\n%s", want, logs)
		}
	}
}

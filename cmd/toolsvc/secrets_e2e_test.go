package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretsNeverLeave configures an API key and a key the service only
// holds in its environment (as a later LLM client would), then makes calls
// whose arguments, headers, results, streamed output and request paths
// carry them. Neither may appear in a response, a log line or an audit file.
func TestSecretsNeverLeave(t *testing.T) {
	t.Parallel()
	const apiKey = "api-key-0123456789abcdef"
	const llmKey = "llm-key-fedcba9876543210"
	const argSecret = "not-configured-but-named-secret"
	s := startServer(t, map[string]string{"API_KEYS": apiKey, "LLM_API_KEY": llmKey})
	s.Key = apiKey
	secrets := []string{apiKey, llmKey, argSecret}

	var responses bytes.Buffer
	record := func(v any) {
		b, _ := json.Marshal(v)
		responses.Write(b)
		responses.WriteByte('\n')
	}

	w := s.invoke(t, "write_file", map[string]any{"path": "notes.txt", "content": "api=" + apiKey + "\nllm=" + llmKey + "\n"},
		"X-Session-ID", "sess-"+apiKey, "X-Source", llmKey)
	mustSucceed(t, w)
	record(w)

	r := s.invoke(t, "read_file", map[string]any{"path": "notes.txt"})
	out := mustSucceed(t, r)
	record(r)
	if strings.Count(out, "[REDACTED]") != 2 {
		t.Errorf("read_file result does not show both keys redacted: %q", out)
	}
	if data, _ := os.ReadFile(filepath.Join(s.Workspace, "notes.txt")); !strings.Contains(string(data), llmKey) {
		t.Errorf("the file itself should hold what was written; redaction is for what leaves the service")
	}

	e := s.invoke(t, "exec", execArgs("printf '%s\\n' "+llmKey))
	record(e)
	assertContains(t, "exec result", e.Result, "[REDACTED]")

	// An argument named like a secret is blanked in the audit record even
	// though its value is not a configured secret.
	bad := s.invoke(t, "read_file", map[string]any{"path": "notes.txt", "db_password": argSecret, "X-Api-Key": argSecret})
	record(bad)

	// A streamed call whose output prints a key in two halves, so that it
	// may arrive split across output events.
	body, _ := json.Marshal(execArgs("printf 'llm-key-fedcba98'; sleep 0.3; printf '76543210 done\\n'"))
	req, _ := http.NewRequest("POST", s.URL+"/tools/exec/invoke", bytes.NewReader(body))
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var stream strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			stream.WriteString(d)
		}
	}
	resp.Body.Close()
	responses.WriteString(stream.String())
	assertContains(t, "streamed events", stream.String(), "[REDACTED]", "done")

	// A request path holding a key ends up in the access log. (The 404
	// body repeats the name to the caller who sent it; that is not checked.)
	if resp404, _ := s.do(t, "POST", "/tools/"+llmKey+"/invoke", strings.NewReader("{}"), nil); resp404.StatusCode != http.StatusNotFound {
		t.Errorf("unknown tool: HTTP %d", resp404.StatusCode)
	}

	s.Stop(t)
	logs := s.Logs()
	if !strings.Contains(logs, "/tools/[REDACTED]/invoke") {
		t.Errorf("the access log line of the unknown tool is missing or unredacted:\n%s", logs)
	}
	auditText := readAuditText(s)
	if !strings.Contains(auditText, `"db_password":"[REDACTED]"`) || !strings.Contains(auditText, `"session_id":"sess-[REDACTED]"`) {
		t.Errorf("audit records lack the redacted argument or session:\n%s", auditText)
	}
	for _, sec := range secrets {
		for what, text := range map[string]string{"responses": responses.String(), "logs": logs, "audit": auditText} {
			if strings.Contains(text, sec) {
				t.Errorf("%s contain the secret %q:\n%s", what, sec, text)
			}
		}
	}
}

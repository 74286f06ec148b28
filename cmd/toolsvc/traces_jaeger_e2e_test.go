//go:build linux

package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTracesInJaeger sends a traced call's spans to a real Jaeger (v2,
// in-memory, on free loopback ports) and reads them back from Jaeger's
// query API: the door's span, execute_tool and exec's span, one tree under
// the caller's span. Jaeger takes minutes to build, so it is not built
// here: scripts/trace-viewer.sh builds it and says where, and
// TOOLSVC_TEST_JAEGER names the binary.
//
//	TOOLSVC_TEST_JAEGER=~/.cache/toolsvc/jaeger-v1.75.0/jaeger go test -run TestTracesInJaeger ./cmd/toolsvc/
func TestTracesInJaeger(t *testing.T) {
	bin := os.Getenv("TOOLSVC_TEST_JAEGER")
	if bin == "" {
		t.Skip("TOOLSVC_TEST_JAEGER is not set: set it to a jaeger binary (v2; scripts/trace-viewer.sh builds one) to run this test")
	}
	t.Parallel()
	otlp, query := startJaeger(t, bin)

	s := startServer(t, map[string]string{"OTEL_ENDPOINT": "http://" + otlp})
	traceID, parent := randomHex(t, 16), randomHex(t, 8)
	req, err := http.NewRequest("POST", s.URL+"/tools/exec/invoke", strings.NewReader(`{"command": "echo traced"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("traceparent", "00-"+traceID+"-"+parent+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("exec answered %s", resp.Status)
	}
	// Stopping the service sends what its exporter still holds.
	s.Stop(t)

	spans := jaegerTrace(t, query, traceID, 3)
	byName := map[string]jaegerSpan{}
	for _, sp := range spans {
		byName[sp.OperationName] = sp
	}
	door, call, run := byName["POST /tools/{name}/invoke"], byName["execute_tool exec"], byName["exec"]
	for _, c := range []struct {
		sp           jaegerSpan
		name, parent string
	}{{door, "POST /tools/{name}/invoke", parent}, {call, "execute_tool exec", door.SpanID}, {run, "exec", call.SpanID}} {
		if c.sp.SpanID == "" {
			t.Errorf("Jaeger has no span %q in trace %s: %+v", c.name, traceID, spans)
		} else if c.sp.parent() != c.parent {
			t.Errorf("span %q's parent is %q in Jaeger, want %q", c.name, c.sp.parent(), c.parent)
		}
	}
	if got := call.tag("gen_ai.tool.name"); got != "exec" {
		t.Errorf("execute_tool exec has gen_ai.tool.name=%v in Jaeger", got)
	}
	if got := run.tag("process.exit.code"); fmt.Sprint(got) != "0" {
		t.Errorf("exec's span has process.exit.code=%v in Jaeger", got)
	}
}

// startJaeger starts the jaeger binary with in-memory storage, its OTLP/HTTP
// receiver and its query API on free loopback ports, and returns their
// addresses once the query API answers.
func startJaeger(t *testing.T, bin string) (otlp, query string) {
	t.Helper()
	otlp = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	query = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	config := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [jaeger_storage_exporter]}
  telemetry: {metrics: {level: none}}
extensions:
  jaeger_storage: {backends: {memstore: {memory: {max_traces: 1000}}}}
  jaeger_query:
    storage: {traces: memstore}
    enable_tracing: false
    http: {endpoint: "%s"}
    grpc: {endpoint: "127.0.0.1:%d"}
receivers:
  otlp: {protocols: {http: {endpoint: "%s"}}}
processors:
  batch:
exporters:
  jaeger_storage_exporter: {trace_storage: memstore}
`, query, freePort(t), otlp)), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	cmd := exec.Command(bin, "--config", config)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get("http://" + query + "/api/services"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return otlp, query
			}
		}
		select {
		case <-done:
			t.Fatalf("jaeger ended: %s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("jaeger's query API did not answer at %s within a minute", query)
		}
	}
}

// jaegerSpan is a span as Jaeger's query API (/api/traces/{id}) gives it.
type jaegerSpan struct {
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

func (s jaegerSpan) tag(key string) any {
	for _, tg := range s.Tags {
		if tg.Key == key {
			return tg.Value
		}
	}
	return nil
}

// jaegerTrace polls Jaeger's query API until the trace has at least n
// spans (Jaeger's batch processor stores them a moment after they came).
func jaegerTrace(t *testing.T, query, traceID string, n int) []jaegerSpan {
	t.Helper()
	var spans []jaegerSpan
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get("http://" + query + "/api/traces/" + traceID)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Data []struct {
				Spans []jaegerSpan `json:"spans"`
			} `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err == nil && resp.StatusCode == 200 && len(body.Data) == 1 {
			spans = body.Data[0].Spans
			if len(spans) >= n {
				return spans
			}
		}
	}
	t.Fatalf("Jaeger has %d spans of trace %s after 30 s, want %d", len(spans), traceID, n)
	return nil
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

//go:build linux

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countbot/toolsvc/internal/tracing/tracingtest"
)

// traceClientOut is what testdata/trace_client.py prints.
type traceClientOut struct {
	TraceID  string `json:"trace_id"`
	RESTSpan string `json:"rest_span"`
	MCPSpan  string `json:"mcp_span"`
	REST     struct {
		CallID string `json:"call_id"`
		Status string `json:"status"`
		Result string `json:"result"`
	} `json:"rest"`
	MCP struct {
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		} `json:"result"`
	} `json:"mcp"`
}

// TestTracesAcrossServices follows one trace from a Python client
// (testdata/trace_client.py, sending traceparent as a Python backend
// does) through toolsvc (the REST door, spawn, its sub-agent's model calls
// to aimock, the sub-agent's call of a mounted stdio MCP server) into
// that server (testdata/trace_echo_mcp.py, which answers with the _meta
// traceparent it got), and a second call over /mcp with the context in
// _meta. Every span reaches a loopback OTLP receiver built on the
// official protobuf definitions, and every one follows the semantic
// conventions' YAML with 0 violations; the audit record names the call's
// trace and span.
func TestTracesAcrossServices(t *testing.T) {
	t.Parallel()
	// The system's Python: the mounted server runs in exec's sandbox,
	// which hides version managers' shims under HOME.
	const python = "/usr/bin/python3"
	if _, err := exec.LookPath(python); err != nil {
		notTested(t, "%s is not installed (Debian package python3): %v", python, err)
	}
	rcv := tracingtest.NewReceiver(t)
	const task = "Report the trace you are in."
	llm := startAimock(t, `{"fixtures": [
  {"match": {"userMessage": "`+task+`", "turnIndex": 0},
   "response": {"toolCalls": [{"id": "call_trace", "name": "echo__trace", "arguments": {}}]}},
  {"match": {"userMessage": "`+task+`", "turnIndex": 1, "toolCallId": "call_trace"},
   "response": {"content": "The trace went through."}}
]}`)
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join("testdata", "trace_echo_mcp.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "trace_echo_mcp.py"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	file := writeToolsFile(t, `{"mcpServers": {"echo": {"command": `+mustJSON(python)+`, "args": ["trace_echo_mcp.py"], "subagents": true}}}`)
	s := startServer(t, llmEnv(llm, map[string]string{"TOOLS_FILE": file, "WORKSPACE": ws, "OTEL_ENDPOINT": rcv.URL}))
	logMCPOnFailure(t, s)
	waitMCPServers(t, s, "echo")

	out, err := exec.Command(python, filepath.Join("testdata", "trace_client.py"), s.URL, task).Output()
	if err != nil {
		t.Fatalf("trace_client.py: %v\n%s", err, out)
	}
	var got traceClientOut
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("trace_client.py printed %s: %v", out, err)
	}
	if got.REST.Status != "success" || !strings.Contains(got.REST.Result, "The trace went through.") {
		t.Fatalf("spawn answered %+v", got.REST)
	}
	// The server's answer over /mcp: the traceparent its _meta carried.
	if len(got.MCP.Result.Content) != 1 || got.MCP.Result.IsError {
		t.Fatalf("echo__trace over /mcp answered %+v", got.MCP)
	}
	// Stopping the service sends what its exporter still holds.
	s.Stop(t)

	spans := rcv.Spans()
	t.Logf("the receiver got %d spans in %d requests:\n%s", len(spans), rcv.Requests(), tracingtest.Tree(spans))
	conv, err := tracingtest.LoadConventions(tracingtest.ModelDir())
	if err != nil {
		t.Fatal(err)
	}
	violations := 0
	for _, sp := range spans {
		for _, v := range conv.Check(sp) {
			t.Error(v)
			violations++
		}
	}
	t.Logf("%d spans checked against the conventions: %d violations", len(spans), violations)
	followTrace(t, spans, got)
	checkEchoes(t, spans, got)
	checkAuditIDs(t, s, spans, got)
}

// followTrace: the spans of the REST call are one tree under the
// client's span: its server span, spawn's call, the sub-agent's model
// calls and its call of the mounted server, down to the client span of
// that server's call.
func followTrace(t *testing.T, spans []tracingtest.Span, got traceClientOut) {
	t.Helper()
	byID := map[string]tracingtest.Span{}
	for _, sp := range spans {
		byID[sp.SpanID] = sp
	}
	// under reports whether sp descends from the span with ID root.
	under := func(sp tracingtest.Span, root string) bool {
		for seen := 0; sp.ParentSpanID != "" && seen < len(spans); seen++ {
			if sp.ParentSpanID == root {
				return true
			}
			sp = byID[sp.ParentSpanID]
		}
		return false
	}
	find := func(name, parent string) tracingtest.Span {
		t.Helper()
		for _, sp := range spans {
			if sp.Name == name && sp.TraceID == got.TraceID && under(sp, parent) {
				return sp
			}
		}
		t.Fatalf("no span %q in trace %s below span %s", name, got.TraceID, parent)
		return tracingtest.Span{}
	}
	rest := find("POST /tools/{name}/invoke", got.RESTSpan)
	if rest.ParentSpanID != got.RESTSpan {
		t.Errorf("the REST server span's parent is %s, not the client's span %s", rest.ParentSpanID, got.RESTSpan)
	}
	spawn := find("execute_tool spawn", rest.SpanID)
	chats := 0
	for _, sp := range spans {
		if sp.Name == "chat fake-model" && under(sp, spawn.SpanID) {
			chats++
			if _, ok := sp.Attrs["gen_ai.usage.input_tokens"]; !ok {
				t.Errorf("a model call's span has no token usage: %v", sp.Attrs)
			}
		}
	}
	if chats != 2 {
		t.Errorf("%d chat spans below spawn's call, want 2 (one per turn)", chats)
	}
	echo := find("execute_tool echo__trace", spawn.SpanID)
	find("tools/call trace", echo.SpanID)
	mcp := find("tools/call echo__trace", got.MCPSpan)
	if mcp.Kind != "SERVER" || mcp.ParentSpanID != got.MCPSpan {
		t.Errorf("the MCP door's span %+v is not the server span under the _meta's parent %s", mcp, got.MCPSpan)
	}
	find("tools/call trace", mcp.SpanID)
}

// checkEchoes: the mounted server got, in each call's _meta, a
// traceparent in the client's trace whose parent is toolsvc's client
// span of that call.
func checkEchoes(t *testing.T, spans []tracingtest.Span, got traceClientOut) {
	t.Helper()
	var echoed struct {
		Traceparent string `json:"traceparent"`
	}
	if err := json.Unmarshal([]byte(got.MCP.Result.Content[0].Text), &echoed); err != nil {
		t.Fatalf("echo__trace answered %q: %v", got.MCP.Result.Content[0].Text, err)
	}
	parts := strings.Split(echoed.Traceparent, "-")
	if len(parts) != 4 || parts[1] != got.TraceID {
		t.Fatalf("the server got traceparent %q, not one in trace %s", echoed.Traceparent, got.TraceID)
	}
	for _, sp := range spans {
		if sp.SpanID == parts[2] {
			if sp.Name != "tools/call trace" || sp.Kind != "CLIENT" {
				t.Errorf("the server's parent span is %s [%s], want toolsvc's client span of the call", sp.Name, sp.Kind)
			}
			return
		}
	}
	t.Errorf("the server's parent span %s was not received", parts[2])
}

// checkAuditIDs: spawn's audit record names its trace (the client's) and
// its execute_tool span.
func checkAuditIDs(t *testing.T, s *testServer, spans []tracingtest.Span, got traceClientOut) {
	t.Helper()
	recs := waitAuditRecords(t, s, func(recs []map[string]any) bool {
		for _, r := range recs {
			if r["call_id"] == got.REST.CallID && r["status"] != nil {
				return true
			}
		}
		return false
	})
	for _, r := range recs {
		if r["call_id"] != got.REST.CallID {
			continue
		}
		if r["trace_id"] != got.TraceID {
			t.Errorf("spawn's audit record has trace_id %v, want the client's %s", r["trace_id"], got.TraceID)
		}
		for _, sp := range spans {
			if sp.SpanID == r["span_id"] && sp.Name == "execute_tool spawn" {
				return
			}
		}
		t.Errorf("spawn's audit record has span_id %v, which is not its execute_tool span", r["span_id"])
		return
	}
}

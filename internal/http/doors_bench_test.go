package http

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/tools"
	"github.com/countbot/toolsvc/internal/workspace"
)

// echoTool returns its arguments: a call whose cost is the door's own.
type echoTool struct{}

func (echoTool) Name() string        { return "echo" }
func (echoTool) Description() string { return "returns its arguments" }
func (echoTool) Parameters() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)
}
func (echoTool) Execute(_ context.Context, args json.RawMessage) (string, error) {
	return string(args), nil
}

func benchServer(b *testing.B) *httptest.Server {
	reg := registry.New(registry.Options{})
	if err := reg.Register(echoTool{}); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(NewHandler(Options{Registry: reg, Log: zerolog.Nop()}))
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkDoors compares one call of a trivial tool through REST and
// through MCP (the SDK's client, one HTTP request per call), over
// loopback: the cost of the MCP door relative to the REST one.
func BenchmarkDoors(b *testing.B) {
	b.Run("rest", func(b *testing.B) {
		srv := benchServer(b)
		for b.Loop() {
			resp, err := http.Post(srv.URL+"/tools/echo/invoke", "application/json", strings.NewReader(`{"text":"hi"}`))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.Run("mcp", func(b *testing.B) {
		srv := benchServer(b)
		client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		sess, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", MaxRetries: -1}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer sess.Close()
		args := map[string]any{"text": "hi"}
		for b.Loop() {
			res, err := sess.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: args})
			if err != nil || res.IsError {
				b.Fatal(err, res)
			}
		}
	})
}

// doorsServer is a handler with read_file over a folder holding
// small.txt, and the requests of one read_file call through REST and
// through MCP (tools/call, one JSON-RPC request per HTTP request, as the
// SDK's client sends it).
func doorsServer(b *testing.B) (h http.Handler, rest, mcp func() *http.Request) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "small.txt"), []byte(strings.Repeat("hello\n", 10)), 0o600); err != nil {
		b.Fatal(err)
	}
	ws, err := workspace.Open(dir, true)
	if err != nil {
		b.Fatal(err)
	}
	reg := registry.New(registry.Options{})
	if err := reg.Register(tools.NewReadFile(ws, 100000, nil)); err != nil {
		b.Fatal(err)
	}
	h = NewHandler(Options{Registry: reg, Log: zerolog.Nop()})
	rest = func() *http.Request {
		req := httptest.NewRequest(http.MethodPost, "/tools/read_file/invoke", strings.NewReader(`{"path":"small.txt"}`))
		req.Header.Set("Content-Type", "application/json")
		return req
	}
	mcp = func() *http.Request {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"small.txt"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		return req
	}
	return h, rest, mcp
}

func serveOK(b *testing.B, h http.Handler, req *http.Request) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"status":"success"`) {
		b.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

// BenchmarkDoorsServer is the server's own cost of one read_file call of a
// small file, through REST and through MCP, measured on the handler
// without a client or a connection. Compare the two lines' ns/op and B/op,
// or see BenchmarkDoorsRatio.
func BenchmarkDoorsServer(b *testing.B) {
	h, rest, mcp := doorsServer(b)
	b.Run("rest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			serveOK(b, h, rest())
		}
	})
	b.Run("mcp", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			serveOK(b, h, mcp())
		}
	})
}

// BenchmarkDoorsRatio takes turns, 50 REST calls then 50 MCP calls, and
// reports MCP's time and bytes allocated per call as ratios to REST's, in
// one run (the machine's load changes less within a round than between
// two benchmarks). The goal is mcp/rest-time <= 1.2 and mcp/rest-bytes <= 2.
func BenchmarkDoorsRatio(b *testing.B) {
	h, rest, mcp := doorsServer(b)
	var took [2]time.Duration
	var bytes [2]uint64
	var ms runtime.MemStats
	batch := func(i int, req func() *http.Request) {
		runtime.ReadMemStats(&ms)
		a0, t0 := ms.TotalAlloc, time.Now()
		for range 50 {
			serveOK(b, h, req())
		}
		took[i] += time.Since(t0)
		runtime.ReadMemStats(&ms)
		bytes[i] += ms.TotalAlloc - a0
	}
	for b.Loop() {
		batch(0, rest)
		batch(1, mcp)
	}
	b.ReportMetric(float64(took[1])/float64(took[0]), "mcp/rest-time")
	b.ReportMetric(float64(bytes[1])/float64(bytes[0]), "mcp/rest-bytes")
	b.ReportMetric(float64(bytes[0])/float64(50*b.N), "rest-B/call")
	b.ReportMetric(float64(bytes[1])/float64(50*b.N), "mcp-B/call")
}

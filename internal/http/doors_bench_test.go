package http

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// BenchmarkDoorsServer is the server's own cost of one read_file call of a
// small file, through REST and through MCP (tools/call, one JSON-RPC
// request per HTTP request, as the SDK's client sends it), measured on the
// handler without a client or a connection: the figures the goal "MCP
// costs the server about what REST does" is about. Compare the two lines'
// ns/op and B/op.
func BenchmarkDoorsServer(b *testing.B) {
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
	h := NewHandler(Options{Registry: reg, Log: zerolog.Nop()})
	serve := func(b *testing.B, path string, body string, hdr map[string]string, want string) {
		b.ReportAllocs()
		for b.Loop() {
			req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want) {
				b.Fatalf("%d %s", rec.Code, rec.Body)
			}
		}
	}
	b.Run("rest", func(b *testing.B) {
		serve(b, "/tools/read_file/invoke", `{"path":"small.txt"}`, nil, `"status":"success"`)
	})
	b.Run("mcp", func(b *testing.B) {
		serve(b, "/mcp", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"small.txt"}}}`,
			map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-06-18"}, `"status":"success"`)
	})
}

package http

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/registry"
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

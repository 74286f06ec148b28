package mcpmount

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
)

// BenchmarkCall compares one call of a trivial stdio MCP tool (the fake
// server's echo) made through toolsvc (the registry: schema check, then
// the mounted tool) with the same call made directly with the go-sdk
// client over the same kind of pipe. Both servers run unconfined, so that
// the difference is the mounting alone; the sandbox costs only at start.
//
//	go test -run '^$' -bench BenchmarkCall ./internal/mcpmount/
func BenchmarkCall(b *testing.B) {
	args := json.RawMessage(`{"text":"hello"}`)
	b.Run("toolsvc", func(b *testing.B) {
		e := newEnv(b, sandbox.None)
		s := e.start(b, "fake", fakeConfig(b, "raw", nil))
		reg := registryOf(b, s)
		ctx := context.Background()
		b.ResetTimer()
		for b.Loop() {
			if r := reg.Invoke(ctx, "fake__echo", args, registry.Meta{}); r.Result != "hello" {
				b.Fatalf("%+v", r)
			}
		}
	})
	b.Run("sdk-direct", func(b *testing.B) {
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), fakeVar+"=raw")
		client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
		cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		ctx := context.Background()
		b.ResetTimer()
		for b.Loop() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
			if err != nil || res.Content[0].(*mcp.TextContent).Text != "hello" {
				b.Fatal(res, err)
			}
		}
	})
}

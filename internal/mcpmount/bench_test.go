package mcpmount

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/sandbox"
)

// BenchmarkCall compares one call of a trivial stdio MCP tool (the fake
// server's echo) made through toolsvc (the registry: schema check, then
// the mounted tool) with the same call made directly with the go-sdk
// client to another copy of the same server. Both servers run unconfined,
// so that the difference is the mounting alone; the sandbox costs only at
// start. The two calls alternate within each iteration, so that a noisy
// machine slows both alike; the metrics are the mean time of each and
// their ratio.
//
//	go test -run '^$' -bench BenchmarkCall ./internal/mcpmount/
func BenchmarkCall(b *testing.B) {
	args := json.RawMessage(`{"text":"hello"}`)
	e := newEnv(b, sandbox.None)
	s := e.start(b, "fake", fakeConfig(b, "raw", nil))
	reg := registryOf(b, s)

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
	var viaToolsvc, direct time.Duration
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		if r := reg.Invoke(ctx, "fake__echo", args, registry.Meta{}); r.Result != "hello" {
			b.Fatalf("%+v", r)
		}
		t1 := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
		if err != nil || res.Content[0].(*mcp.TextContent).Text != "hello" {
			b.Fatal(res, err)
		}
		viaToolsvc += t1.Sub(t0)
		direct += time.Since(t1)
		n++
	}
	b.ReportMetric(float64(viaToolsvc.Nanoseconds())/float64(n), "toolsvc-ns/call")
	b.ReportMetric(float64(direct.Nanoseconds())/float64(n), "direct-ns/call")
	b.ReportMetric(float64(viaToolsvc)/float64(direct), "ratio")
}

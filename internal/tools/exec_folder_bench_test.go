package tools

import (
	"context"
	"testing"

	"github.com/countbot/toolsvc/internal/registry"
)

// BenchmarkExecTrue runs `true` through exec, as the registry would call
// it, in a call without a folder of its own, whose cost and allocations a
// key's folder must not change:
//
//	go test -run '^$' -bench ExecTrue -benchmem ./internal/tools/
func BenchmarkExecTrue(b *testing.B) {
	e, _ := newTestExec(b, ExecOptions{})
	ctx := registry.WithCall(context.Background(), registry.Call{Tool: "exec"})
	args := []byte(`{"command":"true"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Execute(ctx, args); err != nil {
			b.Fatal(err)
		}
	}
}

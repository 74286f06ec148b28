package approval_test

import (
	"context"
	"testing"

	"github.com/countbot/toolsvc/internal/approval"
)

// BenchmarkHoldNoRule is what every call that needs no approval pays: the
// rules asked, nothing held.
func BenchmarkHoldNoRule(b *testing.B) {
	svc, _, _ := newService(b, map[string]approval.Rule{"exec": {Kind: approval.Always}})
	c := call("alice", "read_file", `{"path":"a.txt"}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if out := svc.Hold(ctx, c); !out.Run {
			b.Fatal(out)
		}
	}
}

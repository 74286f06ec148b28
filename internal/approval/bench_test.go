package approval_test

import (
	"context"
	"testing"

	"github.com/countbot/toolsvc/internal/approval"
)

// BenchmarkHoldNoRule is what every call that needs no approval pays: the
// rules asked, nothing held. BenchmarkRoundTrip is a held call's whole
// round trip in the service (held, approved, sent again and let run) on
// the folder store, which writes a file per change.
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

func BenchmarkRoundTrip(b *testing.B) {
	svc, _, _ := newService(b, map[string]approval.Rule{"exec": {Kind: approval.Always}})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c := call("alice", "exec", `{"command":"git push origin main","timeout":30}`)
		out := svc.Hold(ctx, c)
		if out.Held == nil {
			b.Fatal(out)
		}
		if _, err := svc.Decide(ctx, "bob", out.Held.ID, "approve", "ok"); err != nil {
			b.Fatal(err)
		}
		if out := svc.Hold(ctx, c); !out.Run {
			b.Fatal(out)
		}
	}
}

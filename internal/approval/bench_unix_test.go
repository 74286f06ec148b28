//go:build unix

package approval_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/approval"
)

// BenchmarkRoundTrip is a held call's whole round trip in the service
// (held, approved, sent again and let run) on the folder store, which
// writes a file per change and waits for the disk once (the use). Besides
// the wall time it reports the process's CPU time per round trip
// (cpu-ns/op): the service's own cost, which a wait for the disk does not
// take.
func BenchmarkRoundTrip(b *testing.B) {
	svc, _, _ := newService(b, map[string]approval.Rule{"exec": {Kind: approval.Always}})
	ctx := context.Background()
	b.ReportAllocs()
	before := cpuTime()
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
	b.ReportMetric(float64(cpuTime()-before)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

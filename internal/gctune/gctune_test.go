package gctune

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, headroom uint64
		max, want      int
	}{
		{live: 2 * mib, headroom: 16 * mib, max: 800, want: 800},  // small heap: capped
		{live: 4 * mib, headroom: 16 * mib, max: 800, want: 400},  // goal 20 MiB
		{live: 10 * mib, headroom: 16 * mib, max: 800, want: 160}, // goal 26 MiB
		{live: 64 * mib, headroom: 16 * mib, max: 800, want: 100}, // large heap: default pace
		{live: 0, headroom: 16 * mib, max: 800, want: 800},
	} {
		if got := percentFor(c.live, c.headroom, c.max); got != c.want {
			t.Errorf("percentFor(%d MiB, %d MiB, %d) = %d, want %d", c.live/mib, c.headroom/mib, c.max, got, c.want)
		}
	}
}

// currentPercent reads the runtime's GOGC value.
func currentPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// waitFor polls cond until it holds or a generous bound passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if cond() {
			return
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("never happened: %s", what)
}

func TestRaisesPaceForSmallHeapAndRestoresOnStop(t *testing.T) {
	t.Setenv("GOGC", "") // Start must not see an operator's value
	ctx, cancel := context.WithCancel(context.Background())
	tu := Start(ctx, Options{Headroom: 1 << 30, MaxPercent: 500, Idle: time.Hour})
	if tu == nil {
		t.Fatal("Start returned nil without GOGC set")
	}
	waitFor(t, "the tuner raises GOGC after a collection", func() bool { return tu.Percent() == 500 })
	if p := currentPercent(); p != 500 {
		t.Fatalf("runtime GOGC = %d, want 500", p)
	}
	cancel()
	waitFor(t, "GOGC back to 100 after stop", func() bool { return tu.Percent() == 100 && currentPercent() == 100 })
	// Stopped: later collections leave the default alone.
	runtime.GC()
	runtime.GC()
	if p := currentPercent(); p != 100 {
		t.Fatalf("after stop GOGC = %d, want 100", p)
	}
}

func TestOperatorGOGCStands(t *testing.T) {
	t.Setenv("GOGC", "150")
	if tu := Start(context.Background(), Options{}); tu != nil {
		t.Fatal("Start tuned although GOGC is set")
	}
}

func TestIdleReturnsMemoryOncePerSpell(t *testing.T) {
	tu := newTuner(Options{Idle: 20 * time.Millisecond, IdleBytes: 1 << 20})
	var frees atomic.Int32
	tu.free = func() { frees.Add(1) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go tu.watchIdle(ctx)
	waitFor(t, "memory returned when idle", func() bool { return frees.Load() >= 1 })
	// Still idle: not again.
	time.Sleep(100 * time.Millisecond)
	if n := frees.Load(); n != 1 {
		t.Fatalf("returned %d times in one idle spell, want 1", n)
	}
	// Busy for a while, then idle again: returned once more.
	var sink [][]byte
	for i := 0; i < 200; i++ {
		sink = append(sink, make([]byte, 64<<10))
		if i%20 == 0 {
			sink = sink[:0]
			time.Sleep(5 * time.Millisecond)
		}
	}
	_ = sink
	waitFor(t, "memory returned after the next idle spell", func() bool { return frees.Load() >= 2 })
}

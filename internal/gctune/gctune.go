// Package gctune paces the garbage collector for a service whose live heap
// is a few MiB while every call allocates a little.
//
// With the runtime's default pace (GOGC=100) a heap of 3 MiB is collected
// each time 3 MiB more has been allocated: several times a second under
// load, every few hundred calls, and each collection costs the same fixed
// work however little it finds. The tuner keeps the heap goal at least
// Headroom above the live heap instead, so a small heap is collected a few
// times less often, while a large one (a big file held by a call) keeps the
// default pace: the goal is max(2 x live, live + Headroom). Once the
// service has been idle for a while, the free memory is returned to the
// system at once (the runtime would keep up to the raised goal), so an
// idle service stays small.
//
// An operator who sets GOGC keeps it: the tuner then does nothing.
package gctune

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// Options configure the tuner.
type Options struct {
	// Headroom is how far above the live heap the next collection may wait
	// (default 16 MiB).
	Headroom uint64
	// MaxPercent caps the GOGC value the tuner sets (default 800).
	MaxPercent int
	// Idle is how long allocation must stay under IdleBytes before free
	// memory is returned to the system (default 5 s).
	Idle time.Duration
	// IdleBytes is the allocation per Idle period below which the service
	// counts as idle (default 1 MiB).
	IdleBytes uint64
}

const defaultPercent = 100

// Tuner adjusts the collector's pace after every collection.
type Tuner struct {
	opts Options

	mu      sync.Mutex
	percent int // what the tuner last set
	stopped bool
	samples []metrics.Sample
	free    func() // returns free memory to the system; tests count calls
}

// Start begins tuning and returns the tuner, or nil when GOGC is set in
// the environment (the operator's choice stands). Tuning stops when ctx is
// done, leaving the default pace.
func Start(ctx context.Context, opts Options) *Tuner {
	if os.Getenv("GOGC") != "" {
		return nil
	}
	t := newTuner(opts)
	t.start(ctx)
	return t
}

func (t *Tuner) start(ctx context.Context) {
	t.arm()
	go t.watchIdle(ctx)
}

func newTuner(opts Options) *Tuner {
	if opts.Headroom == 0 {
		opts.Headroom = 16 << 20
	}
	if opts.MaxPercent <= defaultPercent {
		opts.MaxPercent = 800
	}
	if opts.Idle <= 0 {
		opts.Idle = 5 * time.Second
	}
	if opts.IdleBytes == 0 {
		opts.IdleBytes = 1 << 20
	}
	return &Tuner{opts: opts, percent: defaultPercent, free: debug.FreeOSMemory, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/heap/allocs:bytes"},
	}}
}

// Percent is the GOGC value the tuner last set.
func (t *Tuner) Percent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.percent
}

// sentinel is garbage made on purpose: its finalizer runs after the
// collection that finds it, and makes the next one. It holds a pointer so
// that it is not batched with other tiny allocations.
type sentinel struct{ t *Tuner }

func (t *Tuner) arm() {
	runtime.SetFinalizer(&sentinel{t: t}, func(s *sentinel) {
		if s.t.afterCollection() {
			s.t.arm()
		}
	})
}

// afterCollection sets the pace from the live heap the collection left,
// and reports whether to keep watching.
func (t *Tuner) afterCollection() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	metrics.Read(t.samples[:1])
	live := t.samples[0].Value.Uint64()
	t.set(percentFor(live, t.opts.Headroom, t.opts.MaxPercent))
	return true
}

// percentFor is the GOGC value that puts the heap goal at live+headroom,
// never below the default pace nor above max.
func percentFor(live, headroom uint64, max int) int {
	if live == 0 {
		return max
	}
	p := headroom * 100 / live
	switch {
	case p < defaultPercent:
		return defaultPercent
	case p > uint64(max):
		return max
	}
	return int(p)
}

// set changes the pace when it moved by more than a tenth, so that small
// swings of the live heap do not reset the collector's goal each time.
func (t *Tuner) set(p int) {
	if d := p - t.percent; d*10 > t.percent || -d*10 > t.percent || (p == defaultPercent && t.percent != p) {
		debug.SetGCPercent(p)
		t.percent = p
	}
}

// watchIdle returns free memory to the system once per idle spell: when
// the service has allocated less than IdleBytes over an Idle period.
func (t *Tuner) watchIdle(ctx context.Context) {
	tick := time.NewTicker(t.opts.Idle)
	defer tick.Stop()
	last, freed := t.allocated(), false
	for {
		select {
		case <-ctx.Done():
			t.mu.Lock()
			t.stopped = true
			t.set(defaultPercent)
			t.mu.Unlock()
			return
		case <-tick.C:
			now := t.allocated()
			idle := now-last < t.opts.IdleBytes
			if idle && !freed {
				t.free()
			}
			freed = idle
			last = t.allocated() // the collection above allocates a little
		}
	}
}

func (t *Tuner) allocated() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	metrics.Read(t.samples[1:])
	return t.samples[1].Value.Uint64()
}

package logbuf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder keeps each write it is given and tells of it on a channel.
type recorder struct {
	mu     sync.Mutex
	writes []string
	wrote  chan struct{}
	fail   error
}

func newRecorder() *recorder { return &recorder{wrote: make(chan struct{}, 100)} }

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return 0, r.fail
	}
	r.writes = append(r.writes, string(p))
	r.wrote <- struct{}{}
	return len(p), nil
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.writes...)
}

const (
	info1 = `{"level":"info","method":"GET","path":"/tools","status":200}` + "\n"
	info2 = `{"level":"info","method":"POST","path":"/tools/read_file/invoke","status":200}` + "\n"
	warn  = `{"level":"warn","message":"the audit log is slow"}` + "\n"
	audit = `{"call_id":"c1","tool_name":"read_file"}` + "\n"
)

func TestUrgent(t *testing.T) {
	for _, c := range []struct {
		line string
		want bool
	}{
		{info1, false},
		{`{"level":"debug","message":"x"}`, false},
		{`{"level":"trace","message":"x"}`, false},
		{audit, false},
		{warn, true},
		{`{"level":"error","message":"x"}`, true},
		{`{"level":"fatal","message":"x"}`, true},
		{`{"level":"panic","message":"x"}`, true},
		{`{"level":"information","message":"x"}`, true}, // not info: written at once
		{`{"level":"`, true},
		{``, false},
		{"plain text\n", false},
	} {
		if got := urgent([]byte(c.line)); got != c.want {
			t.Errorf("urgent(%q) = %v, want %v", c.line, got, c.want)
		}
	}
}

// Info lines wait for the interval and go out in one write; nothing is
// written before.
func TestInfoLinesWaitForTheInterval(t *testing.T) {
	r := newRecorder()
	b := New(r, 50*time.Millisecond)
	start := time.Now()
	for _, l := range []string{info1, audit, info2} {
		if n, err := b.Write([]byte(l)); n != len(l) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if got := r.all(); len(got) != 0 {
		t.Fatalf("written before the interval: %q", got)
	}
	<-r.wrote
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("the batch was written after %s, before the interval", waited)
	}
	if got := r.all(); len(got) != 1 || got[0] != info1+audit+info2 {
		t.Errorf("writes = %q, want the three lines in one", got)
	}
	// The next line starts a new interval.
	b.Write([]byte(info1))
	<-r.wrote
	if got := r.all(); len(got) != 2 || got[1] != info1 {
		t.Errorf("writes = %q", got)
	}
}

// A warning goes out at once, after the lines that came before it.
func TestWarningWrittenAtOnceInOrder(t *testing.T) {
	r := newRecorder()
	b := New(r, time.Hour)
	b.Write([]byte(info1))
	b.Write([]byte(warn))
	if got := r.all(); len(got) != 1 || got[0] != info1+warn {
		t.Fatalf("writes = %q, want the info line then the warning, in one write", got)
	}
	// With nothing waiting, a warning is passed on as it is.
	b.Write([]byte(warn))
	if got := r.all(); len(got) != 2 || got[1] != warn {
		t.Fatalf("writes = %q", got)
	}
}

func TestFullBufferWrittenWithoutWaiting(t *testing.T) {
	r := newRecorder()
	b := New(r, time.Hour)
	n := 0
	for len(r.all()) == 0 {
		b.Write([]byte(info1))
		n += len(info1)
		if n > 2*MaxBuffered {
			t.Fatal("nothing written with twice MaxBuffered waiting")
		}
	}
	if n < MaxBuffered {
		t.Errorf("written after %d bytes, before MaxBuffered (%d)", n, MaxBuffered)
	}
	if got := r.all()[0]; got != strings.Repeat(info1, n/len(info1)) {
		t.Errorf("the batch is not the lines in order (%d bytes)", len(got))
	}
	// A line longer than the buffer is not copied into it.
	long := `{"level":"info","message":"` + strings.Repeat("x", MaxBuffered) + `"}` + "\n"
	b.Write([]byte(long))
	if got := r.all(); len(got) != 2 || got[1] != long {
		t.Errorf("the long line was not written at once")
	}
}

func TestCloseWritesWhatWaits(t *testing.T) {
	r := newRecorder()
	b := New(r, time.Hour)
	b.Write([]byte(info1))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b.Write([]byte(info2)) // after Close, lines go out at once
	if got := r.all(); len(got) != 2 || got[0] != info1 || got[1] != info2 {
		t.Errorf("writes = %q", got)
	}
	if err := b.Flush(); err != nil || len(r.all()) != 2 {
		t.Errorf("Flush with nothing waiting: %v, %q", err, r.all())
	}
}

func TestZeroIntervalWritesEachLine(t *testing.T) {
	r := newRecorder()
	b := New(r, 0)
	b.Write([]byte(info1))
	b.Write([]byte(info2))
	if got := r.all(); len(got) != 2 {
		t.Errorf("writes = %q, want each line on its own", got)
	}
}

// A batch the timer could not write is reported by the next Write, once.
func TestTimerFailureReportedByNextWrite(t *testing.T) {
	r := newRecorder()
	broken := errors.New("broken pipe")
	r.fail = broken
	b := New(r, time.Millisecond)
	b.Write([]byte(info1))
	deadline := time.Now().Add(time.Minute)
	for {
		b.mu.Lock()
		failed := b.err != nil
		b.mu.Unlock()
		if failed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the timer never tried to write")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := b.Write([]byte(info2)); !errors.Is(err, broken) {
		t.Errorf("Write after a failed batch: %v, want %v", err, broken)
	}
	r.mu.Lock()
	r.fail = nil
	r.mu.Unlock()
	if _, err := b.Write([]byte(warn)); err != nil {
		t.Errorf("the failure was reported twice: %v", err)
	}
}

// Lines of many writers never mix, and none is lost (run with -race).
func TestConcurrentWritersKeepLinesWhole(t *testing.T) {
	var out syncBuffer
	b := New(&out, time.Millisecond)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				level := "info"
				if i%50 == 0 {
					level = "warn"
				}
				fmt.Fprintf(b, `{"level":"%s","writer":%d,"n":%d}`+"\n", level, w, i)
			}
		}()
	}
	wg.Wait()
	b.Close()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 8*500 {
		t.Fatalf("%d lines, want %d", len(lines), 8*500)
	}
	next := map[string]int{}
	for _, l := range lines {
		var level string
		var w, n int
		if _, err := fmt.Sscanf(l, `{"level":%q,"writer":%d,"n":%d}`, &level, &w, &n); err != nil {
			t.Fatalf("a mixed line %q: %v", l, err)
		}
		key := fmt.Sprint(w)
		if n != next[key] {
			t.Fatalf("writer %d: line %d after %d: out of order", w, n, next[key]-1)
		}
		next[key]++
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// BenchmarkWrite: an access log line passed on at once against in
// batches, to a file and to a pipe that another process reads (a
// container engine's), a write(2) each, and to nothing (the buffer's own
// cost).
func BenchmarkWrite(b *testing.B) {
	line := []byte(info2)
	for _, to := range []string{"file", "pipe", "discard"} {
		for _, every := range []time.Duration{0, 100 * time.Millisecond} {
			b.Run(fmt.Sprintf("%s/%s", to, every), func(b *testing.B) {
				var out io.Writer = discard{}
				if to == "file" {
					f, err := os.Create(filepath.Join(b.TempDir(), "log"))
					if err != nil {
						b.Fatal(err)
					}
					defer f.Close()
					out = f
				}
				if to == "pipe" {
					cat := exec.Command("cat")
					cat.Stdout = io.Discard
					pipe, err := cat.StdinPipe()
					if err != nil {
						b.Fatal(err)
					}
					if err := cat.Start(); err != nil {
						b.Skip("no cat to read the pipe: ", err)
					}
					defer cat.Wait()
					defer pipe.Close()
					out = pipe
				}
				w := New(out, every)
				for b.Loop() {
					w.Write(line)
				}
				w.Close()
			})
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

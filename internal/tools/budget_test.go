package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/workspace"
)

// allocated returns the bytes fn allocates per call, averaged over runs
// after one warm-up call (runtime.MemStats.TotalAlloc, which counts every
// allocation, so it is an upper bound of what a call holds at once).
func allocated(t testing.TB, runs int, fn func()) float64 {
	t.Helper()
	fn()
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for range runs {
		fn()
	}
	runtime.ReadMemStats(&m1)
	return float64(m1.TotalAlloc-m0.TotalAlloc) / float64(runs)
}

func budgetWorkspace(t testing.TB) *workspace.Workspace {
	t.Helper()
	ws, err := workspace.Open(filepath.Join(t.TempDir(), "ws"), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// budgetText is n bytes of lines of text: JSON escapes every line break,
// which makes the decoder build the string in a scratch buffer first.
func budgetText(n int) string {
	line := "a line of text for the memory budget of the file tools, 0123456789\n"
	return strings.Repeat(line, n/len(line)+1)[:n]
}

// TestFileToolsMemoryBudget: write_file and edit_file allocate at most
// about twice the content per call, decoding of the arguments included:
// the content is never copied into a byte slice, and an edit reads the
// file once into a buffer of its size and builds the result once.
func TestFileToolsMemoryBudget(t *testing.T) {
	const size = 4 << 20
	text := budgetText(size)
	ws := budgetWorkspace(t)
	ctx := context.Background()

	write := NewWriteFile(ws)
	args, _ := json.Marshal(map[string]string{"path": "big.txt", "content": text})
	perWrite := allocated(t, 5, func() {
		if _, err := write.Execute(ctx, args); err != nil {
			t.Fatal(err)
		}
	})

	edit := NewEditFile(ws)
	if err := os.WriteFile(filepath.Join(ws.Dir(), "big.txt"), []byte(text+"UNIQUE-MARKER\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	flip := []string{"UNIQUE-MARKER", "OTHER-MARKER"}
	i := 0
	perEdit := allocated(t, 5, func() {
		a, _ := json.Marshal(map[string]string{"path": "big.txt", "old_str": flip[i%2], "new_str": flip[(i+1)%2]})
		i++
		if _, err := edit.Execute(ctx, a); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("per call, as a multiple of the %d-byte content: write_file %.2fx, edit_file %.2fx", size, perWrite/size, perEdit/size)
	for name, v := range map[string]float64{"write_file": perWrite, "edit_file": perEdit} {
		if v > 2.2*size {
			t.Errorf("%s allocates %.2fx the content per call, more than about 2x", name, v/size)
		}
	}
}

// BenchmarkListDirHuge lists a folder of many empty files and reports the
// peak heap during the call (sampled every half millisecond from
// runtime/metrics, with the heap before the call subtracted). The entries
// are made once per run with openat and close. The count is 100,000 by
// default; a million entries (TOOLSVC_TEST_LIST_ENTRIES=1000000) take
// about two minutes on a small VM, most of it making and deleting files:
//
//	TOOLSVC_TEST_LIST_ENTRIES=1000000 go test -run '^$' -bench ListDirHuge -benchtime 3x ./internal/tools/
func BenchmarkListDirHuge(b *testing.B) {
	n := 100_000
	if v := os.Getenv("TOOLSVC_TEST_LIST_ENTRIES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	ws := budgetWorkspace(b)
	dir := filepath.Join(ws.Dir(), "huge")
	t0 := time.Now()
	makeEmptyFiles(b, dir, n)
	b.Logf("made %d files in %v", n, time.Since(t0).Round(time.Millisecond))
	list := NewListDir(ws, 500)
	args := []byte(`{"path":"huge"}`)
	ctx := context.Background()
	var peak uint64
	for b.Loop() {
		runtime.GC()
		base := heapBytes()
		stop := sampleHeap(&peak)
		out, err := list.Execute(ctx, args)
		stop()
		if err != nil {
			b.Fatal(err)
		}
		if want := fmt.Sprintf("... %d more entries not shown", n-500); !strings.Contains(out, want) {
			b.Fatalf("listing lacks %q:\n%s", want, out[len(out)-200:])
		}
		if peak > base {
			peak -= base
		} else {
			peak = 0
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	if peak > 64<<20 {
		b.Errorf("listing %d entries took %.1f MiB of heap, more than 64 MiB", n, float64(peak)/(1<<20))
	}
}

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// sampleHeap records the largest heap seen into *peak until stop is called.
func sampleHeap(peak *uint64) (stop func()) {
	*peak = heapBytes()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(500 * time.Microsecond)
		defer tick.Stop()
		for {
			*peak = max(*peak, heapBytes())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		*peak = max(*peak, heapBytes())
	}
}

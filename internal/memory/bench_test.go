package memory

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// bigFile writes a memory file of n entries, mixed English and Chinese,
// about 110 bytes each. Every 1000th entry mentions "Kubernetes", every
// 7th is in Chinese and mentions 部署 (but for line 77,777, which alone
// holds "needle").
func bigFile(t testing.TB, dir string, n int) {
	t.Helper()
	var b strings.Builder
	topics := []string{"the user prefers dark mode in every editor", "meeting notes about the quarterly budget review",
		"remember to water the plants on Tuesday", "the project uses Go 1.26 and PostgreSQL 16", "favourite tea is Longjing from Hangzhou"}
	for i := 1; i <= n; i++ {
		day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i/100)
		src := []string{"web", "feishu", "telegram", "qq"}[i%4]
		var content string
		switch {
		case i == 77777:
			content = "the needle is here"
		case i%7 == 0:
			content = fmt.Sprintf("第%d条记录：用户今天讨论了部署流程和测试计划", i)
		default:
			content = fmt.Sprintf("entry %d: %s", i, topics[i%len(topics)])
		}
		if i%1000 == 0 {
			content += " and Kubernetes upgrades"
		}
		fmt.Fprintf(&b, "%s|%s|%s\n", day.Format(DateLayout), src, content)
	}
	writeFile(t, dir, b.String())
}

// TestSearch100k checks search results on a 100,000-entry file against
// what the file is known to hold.
func TestSearch100k(t *testing.T) {
	s, dir := newStore(t)
	bigFile(t, dir, 100000)
	ctx := context.Background()
	cases := []struct {
		kws   []string
		all   bool
		total int
		first []int
	}{
		{[]string{"needle"}, false, 1, []int{77777}},
		{[]string{"KUBERNETES"}, false, 100, []int{100000, 99000, 98000}},
		{[]string{"部署"}, false, 100000/7 - 1, []int{99995, 99988, 99981}},
		{[]string{"部署", "kubernetes"}, true, 100000 / 7000, []int{98000, 91000}},
		{[]string{"needle", "kubernetes"}, false, 101, []int{100000, 99000}},
		{[]string{"zebra"}, false, 0, nil},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.kws, "+"), func(t *testing.T) {
			res, err := s.Search(ctx, c.kws, c.all, 15)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, h := range res.Hits {
				got = append(got, h.N)
			}
			if res.Total != c.total || len(got) != min(15, c.total) || !slices.Equal(got[:len(c.first)], c.first) {
				t.Errorf("total %d hits %v, want total %d starting %v", res.Total, got, c.total, c.first)
			}
			if res.Stats.Entries != 100000 || res.Stats.First != "2024-01-01" {
				t.Errorf("stats %+v", res.Stats)
			}
		})
	}
	// An append is read incrementally and found.
	if _, err := s.Write(ctx, "web", "another needle"); err != nil {
		t.Fatal(err)
	}
	res, _ := s.Search(ctx, []string{"needle"}, false, 15)
	if res.Total != 2 || res.Hits[0].N != 100001 {
		t.Errorf("after append: total %d first %+v", res.Total, res.Hits[0])
	}
}

// BenchmarkSearch100k measures a search of a 100,000-entry memory file
// whose index is warm (the file unchanged since the last call: one open
// and fstat per search). It reports the median alongside the mean.
func BenchmarkSearch100k(b *testing.B) {
	for _, bc := range []struct {
		name string
		kws  []string
		all  bool
	}{
		{"or_rare", []string{"needle", "kubernetes"}, false},
		{"or_common", []string{"tea", "budget", "部署"}, false},
		{"and_chinese", []string{"部署", "测试"}, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, _ := benchStore(b)
			ctx := context.Background()
			if _, err := s.Search(ctx, bc.kws, bc.all, 15); err != nil {
				b.Fatal(err)
			}
			var times []time.Duration
			b.ResetTimer()
			c0 := cpuTime()
			for b.Loop() {
				t0 := time.Now()
				if _, err := s.Search(ctx, bc.kws, bc.all, 15); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(t0))
			}
			b.StopTimer()
			reportMedian(b, times)
			b.ReportMetric(float64(cpuTime()-c0)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}

// BenchmarkLoad100k measures the first search of a 100,000-entry file,
// which parses it (cold index).
func BenchmarkLoad100k(b *testing.B) {
	_, dir := benchStore(b)
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	var times []time.Duration
	for b.Loop() {
		t0 := time.Now()
		s := New(root, Options{})
		if _, err := s.Search(context.Background(), []string{"needle"}, false, 15); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
	}
	reportMedian(b, times)
}

// BenchmarkSearchAfterAppend100k measures a search that first reads one
// entry appended by another writer (incremental refresh).
func BenchmarkSearchAfterAppend100k(b *testing.B) {
	s, dir := benchStore(b)
	ctx := context.Background()
	s.Search(ctx, []string{"needle"}, false, 15)
	f, err := os.OpenFile(filepath.Join(dir, Path), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var times []time.Duration
	for b.Loop() {
		b.StopTimer()
		f.WriteString("2026-12-02|web|appended needle\n")
		b.StartTimer()
		t0 := time.Now()
		if _, err := s.Search(ctx, []string{"needle"}, false, 15); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
	}
	reportMedian(b, times)
}

func benchStore(b *testing.B) (*Store, string) {
	b.Helper()
	s, dir := newStore(b)
	bigFile(b, dir, 100000)
	return s, dir
}

func reportMedian(b *testing.B, times []time.Duration) {
	if len(times) == 0 {
		return
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds())/1e6, "median-ms")
}

// BenchmarkIndexMemory100k reports the heap a loaded store holds for a
// 100,000-entry file, and the peak heap while loading, as multiples of
// the file's size (runtime.MemStats after a GC; the peak from a sampler).
func BenchmarkIndexMemory100k(b *testing.B) {
	_, dir := benchStore(b)
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	fi, err := root.Stat(Path)
	if err != nil {
		b.Fatal(err)
	}
	var held, peak float64
	for b.Loop() {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		s := New(root, Options{})
		if _, err := s.Search(context.Background(), []string{"needle"}, false, 15); err != nil {
			b.Fatal(err)
		}
		runtime.ReadMemStats(&m1) // before a GC: what loading allocated at most
		peak = float64(m1.TotalAlloc-m0.TotalAlloc) / float64(fi.Size())
		runtime.GC()
		runtime.ReadMemStats(&m1)
		held = float64(m1.HeapAlloc-m0.HeapAlloc) / float64(fi.Size())
		runtime.KeepAlive(s)
	}
	b.ReportMetric(held, "held-x-file")
	b.ReportMetric(peak, "allocated-x-file")
	b.ReportMetric(float64(fi.Size())/(1<<20), "file-MiB")
}

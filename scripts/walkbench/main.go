// Command walkbench times the bare file_search walker (internal/walk) on a
// folder, without the HTTP service around it, for scripts/bench-search.sh.
//
//	walkbench -root /tmp/tree200k -pattern '*.go' -runs 10
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/countbot/toolsvc/internal/walk"
)

func main() {
	root := flag.String("root", "/tmp/tree200k", "folder to walk")
	pattern := flag.String("pattern", "*.go", "name pattern")
	runs := flag.Int("runs", 10, "timed runs after one warm-up")
	workers := flag.Int("workers", 0, "walk workers (0: one per CPU)")
	flag.Parse()
	if err := run(*root, *pattern, *runs, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "walkbench:", err)
		os.Exit(1)
	}
}

func run(root, pattern string, runs, workers int) error {
	p, err := walk.Compile(pattern)
	if err != nil {
		return err
	}
	var times []time.Duration
	var count int
	for i := 0; i <= runs; i++ {
		start := time.Now()
		if count, err = search(root, p, workers); err != nil {
			return err
		}
		if i > 0 { // the first run warms the caches
			times = append(times, time.Since(start))
		}
	}
	slices.Sort(times)
	fmt.Printf("walker: median %.1f ms, min %.1f ms over %d runs, %d matches\n",
		ms(times[len(times)/2]), ms(times[0]), len(times), count)
	return nil
}

// search does what file_search does: walk, match, count everything and
// keep the first 20 in path order.
func search(root string, p *walk.Pattern, workers int) (int, error) {
	f, err := os.Open(root)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := walk.WorkerCount(workers)
	tops := make([]*walk.Top, n)
	for i := range tops {
		tops[i] = walk.NewTop(20)
	}
	_, err = walk.Walk(context.Background(), f, walk.Options{Workers: n, MaxDepth: -1,
		Visit: func(w int, dir string, name []byte, k walk.Kind) {
			if k == walk.File && p.Match(name) {
				tops[w].Offer(dir, name, k)
			}
		}})
	count, _ := walk.Merge(20, tops...)
	return count, err
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

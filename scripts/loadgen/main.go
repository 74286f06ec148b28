// Command loadgen drives a running toolsvc with a mixed workload from many
// connections for a fixed time, and reports throughput, latency percentiles
// per tool and overall, errors, and the service's RSS sampled from /proc.
// scripts/load.sh starts a fresh service and runs it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// op is one kind of call in the mix.
type op struct {
	tool   string
	weight int
	body   func(worker, n int) string
}

var mix = []op{
	{"read_file", 30, func(int, int) string { return `{"path":"load/read.txt"}` }},
	{"write_file", 15, func(w, n int) string {
		return fmt.Sprintf(`{"path":"load/out/w%d.txt","content":"worker %d call %d\n"}`, w, w, n)
	}},
	{"list_dir", 15, func(int, int) string { return `{"path":"load/tree"}` }},
	{"file_search", 15, func(int, int) string { return `{"pattern":"*.md","path":"load/tree"}` }},
	{"memory", 15, func(int, int) string { return `{"action":"search","keywords":"tea deploy"}` }},
	{"exec", 10, func(int, int) string { return `{"command":"true"}` }},
}

type sample struct {
	tool string
	dur  time.Duration
	err  string // "" for a success
}

func main() {
	base := flag.String("url", "http://127.0.0.1:8080", "toolsvc base URL")
	conns := flag.Int("conns", 32, "concurrent connections, one caller each")
	dur := flag.Duration("duration", 30*time.Second, "how long to run")
	pid := flag.Int("pid", 0, "toolsvc's process id, for RSS samples (0: none)")
	every := flag.Duration("rss-every", time.Second, "RSS sampling period")
	weights := flag.String("mix", "", "weights to change, e.g. exec=0,read_file=50")
	flag.Parse()

	for _, kv := range strings.Split(*weights, ",") {
		name, v, ok := strings.Cut(kv, "=")
		n, err := strconv.Atoi(v)
		i := slices.IndexFunc(mix, func(o op) bool { return o.tool == name })
		if kv == "" {
			continue
		}
		if !ok || err != nil || n < 0 || i < 0 {
			fmt.Fprintf(os.Stderr, "loadgen: -mix %q: want tool=weight with a tool of the mix\n", kv)
			os.Exit(2)
		}
		mix[i].weight = n
	}
	total := 0
	for _, o := range mix {
		total += o.weight
	}
	if total == 0 {
		fmt.Fprintln(os.Stderr, "loadgen: every weight is zero")
		os.Exit(2)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *conns, MaxConnsPerHost: *conns}, Timeout: time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), *dur)
	defer cancel()

	var rss []float64
	rssDone := make(chan struct{})
	go func() {
		defer close(rssDone)
		t := time.NewTicker(*every)
		defer t.Stop()
		for {
			if *pid > 0 {
				if v, ok := rssMiB(*pid); ok {
					rss = append(rss, v)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()

	results := make([][]sample, *conns)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for n := 0; ctx.Err() == nil; n++ {
				pick := rng.IntN(total)
				o := mix[0]
				for _, c := range mix {
					if pick < c.weight {
						o = c
						break
					}
					pick -= c.weight
				}
				s := call(ctx, client, *base, o.tool, o.body(w, n))
				if ctx.Err() != nil && s.err != "" {
					break // cut off by the end of the run, not a failure
				}
				results[w] = append(results[w], s)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	<-rssDone
	report(slices.Concat(results...), elapsed, *conns, rss, *every)
}

func call(ctx context.Context, c *http.Client, base, tool, body string) sample {
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/tools/"+tool+"/invoke", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Session-ID", "load")
	t0 := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return sample{tool, time.Since(t0), "transport"}
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if err != nil {
		return sample{tool, d, "transport"}
	}
	if resp.StatusCode != http.StatusOK {
		return sample{tool, d, "HTTP " + strconv.Itoa(resp.StatusCode)}
	}
	var res struct {
		Status string `json:"status"`
		Error  *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &res) != nil {
		return sample{tool, d, "bad JSON"}
	}
	if res.Status != "success" {
		code := "?"
		if res.Error != nil {
			code = res.Error.Code
		}
		return sample{tool, d, "tool error " + code}
	}
	return sample{tool, d, ""}
}

func rssMiB(pid int) (float64, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err == nil
		}
	}
	return 0, false
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(p / 100 * float64(len(d)-1))
	return d[i]
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) }

func report(all []sample, elapsed time.Duration, conns int, rss []float64, every time.Duration) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d calls in %.1fs from %d connections: %.0f calls/s\n", len(all), elapsed.Seconds(), conns, float64(len(all))/elapsed.Seconds())
	fmt.Fprintf(&b, "%-12s %8s %8s %8s %8s %8s %8s\n", "tool", "calls", "errors", "p50 ms", "p90 ms", "p99 ms", "max ms")
	errs := map[string]int{}
	row := func(name string, ss []sample) {
		var d []time.Duration
		n := 0
		for _, s := range ss {
			d = append(d, s.dur)
			if s.err != "" {
				n++
			}
		}
		slices.Sort(d)
		var mx time.Duration
		if len(d) > 0 {
			mx = d[len(d)-1]
		}
		fmt.Fprintf(&b, "%-12s %8d %8d %8s %8s %8s %8s\n", name, len(ss), n, ms(pct(d, 50)), ms(pct(d, 90)), ms(pct(d, 99)), ms(mx))
	}
	for _, o := range mix {
		if o.weight == 0 {
			continue
		}
		var ss []sample
		for _, s := range all {
			if s.tool == o.tool {
				ss = append(ss, s)
				if s.err != "" {
					errs[o.tool+": "+s.err]++
				}
			}
		}
		row(o.tool, ss)
	}
	row("all", all)
	if len(errs) == 0 {
		fmt.Fprintln(&b, "errors: none")
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range errs {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "error %s: %d\n", k, errs[k])
	}
	if len(rss) > 0 {
		lo, hi := slices.Min(rss), slices.Max(rss)
		var parts []string
		for _, v := range rss {
			parts = append(parts, strconv.FormatFloat(v, 'f', 0, 64))
		}
		fmt.Fprintf(&b, "service RSS (MiB, every %s): start %.1f, min %.1f, max %.1f, end %.1f\n  %s\n", every, rss[0], lo, hi, rss[len(rss)-1], strings.Join(parts, " "))
	}
	os.Stdout.Write(b.Bytes())
}

// Command execbench times exec calls of `true` through a running toolsvc's
// HTTP API beside the kernel's floor for the same isolation: a command
// line (unshare, bwrap) started from this process, which pays the same
// fork and exec from Go that the service does. Calls and floor runs take
// turns, one at a time, so that both see the same load; each round prints
// the median of each and their ratio, and the last line the median of the
// rounds' ratios. scripts/bench-exec.sh starts the services and runs it.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "toolsvc base URL")
	floor := flag.String("floor", "unshare --pid --fork --mount sh -c true", "the floor's command line (split on spaces)")
	label := flag.String("label", "", "name of this comparison in the output")
	n := flag.Int("n", 50, "calls (and floor runs) per round")
	rounds := flag.Int("rounds", 3, "rounds")
	flag.Parse()

	argv := strings.Fields(*floor)
	client := &http.Client{Timeout: time.Minute}
	endpoint := strings.TrimRight(*url, "/") + "/tools/exec/invoke"
	call := func() error { return invoke(client, endpoint) }
	run := func() error { return exec.Command(argv[0], argv[1:]...).Run() }
	plain := func() error { return exec.Command("/bin/sh", "-c", "true").Run() }
	// Warm up both sides: the first calls pay page faults and the
	// service's first-use costs.
	for range 5 {
		if err := call(); err != nil {
			fail(err)
		}
		if err := run(); err != nil {
			fail(fmt.Errorf("floor %q: %w", *floor, err))
		}
	}
	var ratios, plains []float64
	for r := range *rounds {
		var calls, floors, shs []time.Duration
		for range *n {
			calls = append(calls, timed(call))
			floors = append(floors, timed(run))
			shs = append(shs, timed(plain))
		}
		c, f, p := median(calls), median(floors), median(shs)
		ratio := float64(c) / float64(f)
		ratios = append(ratios, ratio)
		plains = append(plains, float64(c)/float64(p))
		fmt.Printf("%s round %d: exec call %v, floor %v, sh -c true %v; call/floor %.2fx, call/sh %.2fx\n",
			*label, r+1, c.Round(10*time.Microsecond), f.Round(10*time.Microsecond), p.Round(10*time.Microsecond), ratio, float64(c)/float64(p))
	}
	slices.Sort(ratios)
	slices.Sort(plains)
	fmt.Printf("%s: median call/floor %.2fx (rounds %.2f-%.2f); call/sh -c true %.2fx; floor: %s\n",
		*label, ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1], plains[len(plains)/2], *floor)
}

// invoke makes one exec call of `true` and checks that it succeeded.
func invoke(c *http.Client, endpoint string) error {
	resp, err := c.Post(endpoint, "application/json", strings.NewReader(`{"command":"true"}`))
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"status":"success"`)) {
		return fmt.Errorf("exec call: %s: %s", resp.Status, body)
	}
	return nil
}

func timed(f func() error) time.Duration {
	start := time.Now()
	if err := f(); err != nil {
		fail(err)
	}
	return time.Since(start)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "execbench:", err)
	os.Exit(1)
}

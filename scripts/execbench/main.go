//go:build linux

// Command execbench times exec calls of `true` through a running toolsvc's
// HTTP API beside the kernel's floor for the same isolation: a command
// line (unshare, bwrap) started from this process, which pays the same
// fork and exec from Go that the service does. Calls and floor runs take
// turns, one at a time, so that both see the same load; each round prints
// the median of each and their ratio, and the last line the median of the
// rounds' ratios. With -pid it also prints the CPU time per call, the
// service's own and its commands' (/proc/<pid>/stat, in clock ticks),
// against the floor's (getrusage of this process's children): on a
// loaded machine wall time stretches with the run queue, CPU time much
// less. scripts/bench-exec.sh starts the services and runs it.
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
	"syscall"
	"time"

	"github.com/countbot/toolsvc/internal/procgroup"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "toolsvc base URL")
	floor := flag.String("floor", "unshare --pid --fork --mount sh -c true", "the floor's command line (split on spaces)")
	label := flag.String("label", "", "name of this comparison in the output")
	n := flag.Int("n", 50, "calls (and floor runs) per round")
	rounds := flag.Int("rounds", 3, "rounds")
	pid := flag.Int("pid", 0, "the service's process ID, for its CPU time (0: wall time only)")
	gap := flag.Duration("gap", 0, "pause before each call and each floor run, as between an agent's calls (a burst hides costs that a pause brings back)")
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
	var ratios, plains, cpuRatios []float64
	for r := range *rounds {
		var calls, floors, shs []time.Duration
		var floorCPU time.Duration
		svc0 := serviceCPU(*pid)
		for range *n {
			time.Sleep(*gap)
			calls = append(calls, timed(call))
			time.Sleep(*gap)
			c0 := childCPU()
			floors = append(floors, timed(run))
			floorCPU += childCPU() - c0
			shs = append(shs, timed(plain))
		}
		if *pid > 0 {
			callCPU := (serviceCPU(*pid) - svc0) / time.Duration(*n)
			fc := floorCPU / time.Duration(*n)
			cpuRatios = append(cpuRatios, float64(callCPU)/float64(fc))
			fmt.Printf("%s round %d: CPU per call %v (service and command), per floor run %v; %.2fx\n",
				*label, r+1, callCPU.Round(10*time.Microsecond), fc.Round(10*time.Microsecond), float64(callCPU)/float64(fc))
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
	if len(cpuRatios) > 0 {
		slices.Sort(cpuRatios)
		fmt.Printf("%s: median CPU call/floor %.2fx (rounds %.2f-%.2f)\n", *label, cpuRatios[len(cpuRatios)/2], cpuRatios[0], cpuRatios[len(cpuRatios)-1])
	}
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

// serviceCPU returns the CPU time of process pid and of its waited-for
// children (utime, stime, cutime, cstime of /proc/<pid>/stat).
func serviceCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	st, ok := procgroup.ReadStat(pid)
	if !ok {
		fail(fmt.Errorf("no process %d", pid))
	}
	return st.CPUTime()
}

// childCPU returns the CPU time of this process's waited-for children.
func childCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		fail(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "execbench:", err)
	os.Exit(1)
}

//go:build linux

// Command execnetbench times one exec command through several running
// toolsvc services that differ in one setting (the network of exec, as
// scripts/bench-exec.sh starts them), in turns within one run: each round
// makes N calls, one after another over one kept-alive connection, to
// each service in turn, the order rotated from round to round so that no
// service always follows the same other. A shared, noisy machine moves
// every service's figures together within a round, so each round
// compares its own medians: a setting's ratio to the first service (the
// reference) and its difference from it in milliseconds; the summary
// gives the medians of those over the rounds. With each service's process
// ID it also prints the CPU time per call, the service's own and its
// commands' (/proc/<pid>/stat, in clock ticks).
//
//	execnetbench [-command true] [-expect TEXT] [-n 200] [-rounds 5] [-gap 0] LABEL,PID,URL...
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/countbot/toolsvc/internal/procgroup"
)

// service is one running toolsvc and what its turns measured.
type service struct {
	label, endpoint string
	pid             int
	medians, cpus   []time.Duration // one per round
	ratios, diffs   []float64       // against the reference, one per round
	failed          int             // calls whose command failed, left out of the times
}

// maxFailed is the share of a turn's calls that may fail before the run
// stops. A few may: under bubblewrap a command fails to start when a
// mount elsewhere on the machine (another program's tmpfs under /tmp)
// goes away while bubblewrap binds the tree it is in.
const maxFailed = 0.05

func main() {
	command := flag.String("command", "true", "the command each exec call runs")
	expect := flag.String("expect", "", "text the call's result must hold (besides success and exit code 0)")
	n := flag.Int("n", 200, "calls per service per round")
	rounds := flag.Int("rounds", 5, "rounds")
	warmup := flag.Int("warmup", 20, "calls per service before the first round")
	target := flag.Duration("target", time.Millisecond, "the most a setting may add per call to the reference's time (0: no target, the difference is only shown)")
	gap := flag.Duration("gap", 0, "pause before each call, as between an agent's calls (back to back, a call may find the next command's namespace and sandbox not yet made ahead)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: execnetbench [flags] LABEL,PID,URL... (the first service is the reference)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() < 1 || *n < 1 || *rounds < 1 {
		flag.Usage()
		os.Exit(2)
	}
	var svcs []*service
	for _, a := range flag.Args() {
		parts := strings.SplitN(a, ",", 3)
		if len(parts) != 3 {
			fail(fmt.Errorf("%q: want LABEL,PID,URL", a))
		}
		pid, err := strconv.Atoi(parts[1])
		if err != nil {
			fail(fmt.Errorf("%q: %w", a, err))
		}
		svcs = append(svcs, &service{label: parts[0], pid: pid, endpoint: strings.TrimRight(parts[2], "/") + "/tools/exec/invoke"})
	}
	body, err := json.Marshal(map[string]string{"command": *command})
	if err != nil {
		fail(err)
	}
	// One connection per service, kept alive between calls, as a client
	// of the service keeps it.
	client := &http.Client{Timeout: time.Minute}
	call := func(s *service) error { return invoke(client, s.endpoint, body, *expect) }
	// tolerate counts a failed call of s, says the first, and stops the
	// run when a turn of n calls has had too many.
	tolerate := func(s *service, err error, inTurn int) {
		s.failed++
		if s.failed == 1 {
			fmt.Fprintf(os.Stderr, "execnetbench: %s: a call failed (left out of the times): %v\n", s.label, err)
		}
		if float64(inTurn) > maxFailed*float64(*n) {
			fail(fmt.Errorf("%s: %d of %d calls of a round failed; the last: %w", s.label, inTurn, *n, err))
		}
	}

	// The first calls pay page faults, the first spare's making and the
	// connection's.
	for _, s := range svcs {
		failed := 0
		for range *warmup {
			if err := call(s); err != nil {
				failed++
				tolerate(s, err, failed)
			}
		}
		s.failed = 0 // the summary counts the rounds' calls
	}
	ref := svcs[0]
	for r := range *rounds {
		for i := range svcs {
			s := svcs[(i+r)%len(svcs)]
			cpu0 := serviceCPU(s.pid)
			d := make([]time.Duration, 0, *n)
			failed := 0
			for range *n {
				time.Sleep(*gap)
				start := time.Now()
				if err := call(s); err != nil {
					failed++
					tolerate(s, err, failed)
					continue
				}
				d = append(d, time.Since(start))
			}
			s.cpus = append(s.cpus, (serviceCPU(s.pid)-cpu0)/time.Duration(*n))
			s.medians = append(s.medians, median(d))
		}
		var line strings.Builder
		fmt.Fprintf(&line, "round %d:", r+1)
		for _, s := range svcs {
			m := s.medians[r]
			s.ratios = append(s.ratios, float64(m)/float64(ref.medians[r]))
			s.diffs = append(s.diffs, ms(m-ref.medians[r]))
			fmt.Fprintf(&line, " %s %.0f µs", s.label, us(m))
			if s != ref {
				fmt.Fprintf(&line, " (%.2fx, %+.2f ms)", s.ratios[r], s.diffs[r])
			}
			if s.pid > 0 {
				fmt.Fprintf(&line, " [CPU %.0f µs]", us(s.cpus[r]))
			}
			line.WriteString(";")
		}
		fmt.Println(strings.TrimSuffix(line.String(), ";"))
	}
	for _, s := range svcs {
		meds := durs(s.medians)
		fmt.Printf("%s: median %.0f µs per call (rounds %.0f-%.0f)", s.label, mid(meds), slices.Min(meds), slices.Max(meds))
		if s.pid > 0 {
			fmt.Printf(", CPU %.0f µs per call (service and command)", mid(durs(s.cpus)))
		}
		if s.failed > 0 {
			fmt.Printf(", %d of %d calls failed", s.failed, *n**rounds)
		}
		if s != ref {
			d := mid(s.diffs)
			fmt.Printf("; %.2fx %s (rounds %.2f-%.2f); %+.2f ms per call (rounds %+.2f to %+.2f)",
				mid(s.ratios), ref.label, slices.Min(s.ratios), slices.Max(s.ratios),
				d, slices.Min(s.diffs), slices.Max(s.diffs))
			if *target > 0 {
				verdict := "within"
				// Judged as printed, to the hundredth of a millisecond.
				if math.Round(d*100) > math.Round(ms(*target)*100) {
					verdict = "ABOVE"
				}
				fmt.Printf(", %s the target of %+.2f ms", verdict, ms(*target))
			}
		}
		fmt.Println()
	}
}

// invoke makes one exec call and checks that its command succeeded and,
// with expect, that its result holds that text.
func invoke(c *http.Client, endpoint string, body []byte, expect string) error {
	resp, err := c.Post(endpoint, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	var res struct {
		Status   string `json:"status"`
		Result   string `json:"result"`
		ExitCode *int   `json:"exit_code"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &res) != nil || res.Status != "success" ||
		res.ExitCode == nil || *res.ExitCode != 0 || !strings.Contains(res.Result, expect) {
		return fmt.Errorf("exec call: %s: %s", resp.Status, b)
	}
	return nil
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// mid is the median of v (the upper one of an even count).
func mid(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func durs(d []time.Duration) []float64 {
	f := make([]float64, len(d))
	for i, x := range d {
		f[i] = us(x)
	}
	return f
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// serviceCPU returns the CPU time of process pid and of its waited-for
// children (utime, stime, cutime, cstime of /proc/<pid>/stat), or 0
// without a pid.
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

func fail(err error) {
	fmt.Fprintln(os.Stderr, "execnetbench:", err)
	os.Exit(1)
}

